"""bench/soak_plot.py (the soak's curves in docs/performance-scale.md): a series CSV becomes one SVG
panel per kind of figure with a line per series, audit_log left out of the table rows, Unix
times shown from the first sample plus an offset; a file without samples is refused by name."""

import os
import re
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "soak_plot.py")


def plot(csv_text, *args):
    with tempfile.TemporaryDirectory() as d:
        src, out = os.path.join(d, "s.csv"), os.path.join(d, "s.svg")
        with open(src, "w") as f:
            f.write(csv_text)
        run = subprocess.run([sys.executable, SCRIPT, src, out, *args], capture_output=True, text=True)
        svg = open(out).read() if os.path.exists(out) else ""
        return run, svg


class SoakPlot(unittest.TestCase):
    def test_each_series_is_a_line_in_its_panel(self):
        rows = ["seconds,series,value"]
        for t in range(0, 300, 30):
            rows += [f"{t},master rss_mb,{35 + t / 100}", f"{t},agent0 rss_mb,20",
                     f"{t},master threads,34", f"{t},table metrics,{t % 7}",
                     f"{t},table audit_log,{t}"]
        run, svg = plot("\n".join(rows) + "\n", "--title", "a soak")
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertEqual(svg.count("<polyline"), 4)  # audit_log is not drawn
        for title in ("resident memory (MB)", "threads", "table rows"):
            self.assertIn(title, svg)
        self.assertNotIn("open files", svg)  # no fds series: no panel
        self.assertIn(">table metrics<", svg)
        self.assertNotIn("audit_log<", svg)
        # Every point lies inside the 760-wide drawing.
        for xs in re.findall(r'points="([^"]+)"', svg):
            for point in xs.split():
                x, y = map(float, point.split(","))
                self.assertTrue(0 <= x <= 760 and y >= 0, point)

    def test_unix_times_start_at_the_offset(self):
        rows = ["unix_time,series,value", "1796000000,master rss_mb,30", "1796003600,master rss_mb,31"]
        run, svg = plot("\n".join(rows) + "\n", "--offset-minutes", "60")
        self.assertEqual(run.returncode, 0, run.stderr)
        ticks = re.findall(r'text-anchor="middle">(\d+)</text>', svg)
        self.assertEqual(ticks[0], "60")
        self.assertEqual(ticks[-1], "120")

    def test_a_file_without_samples_is_refused(self):
        run, _ = plot("seconds,series,value\n")
        self.assertNotEqual(run.returncode, 0)
        self.assertIn("no samples", run.stderr)


if __name__ == "__main__":
    unittest.main()
