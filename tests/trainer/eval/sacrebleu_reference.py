#!/usr/bin/python3
# Independent reference for tests/trainer/eval/bleu_test.cc: sacreBLEU 2.x's default corpus BLEU
# re-derived from its documented rules (13a regexes run by Python's `re`, closest reference
# length, exp smoothing). Prints the expected score line of every test case and the 13a
# tokenizations. Run: /usr/bin/python3 tests/trainer/eval/sacrebleu_reference.py
import re, math
from collections import Counter
R = [(re.compile(r'([\{-\~\[-\` -\&\(-\+\:-\@\/])'), r' \1 '),
     (re.compile(r'([^0-9])([\.,])'), r'\1 \2 '),
     (re.compile(r'([\.,])([^0-9])'), r' \1 \2'),
     (re.compile(r'([0-9])(-)'), r'\1 \2 ')]
def tok13a(line):
    for a, b in [('<skipped>', ''), ('-\n', ''), ('\n', ' '), ('&quot;', '"'), ('&amp;', '&'), ('&lt;', '<'), ('&gt;', '>')]:
        line = line.replace(a, b)
    line = ' ' + line + ' '
    for r, rep in R: line = r.sub(rep, line)
    return ' '.join(line.split())
def ngrams(words):
    c = Counter()
    for n in range(1, 5):
        for i in range(len(words) - n + 1): c[tuple(words[i:i+n])] += 1
    return c
def bleu(hyps, refstreams, lc=False):
    sys_len = ref_len = 0; correct = [0]*4; total = [0]*4
    for i, h in enumerate(hyps):
        refs = [s[i] for s in refstreams if s[i]]
        prep = lambda x: tok13a((x.lower() if lc else x).rstrip())
        refw = [prep(r).split() for r in refs]
        hw = prep(h).split()
        rng = Counter()
        for w in refw:
            for k, v in ngrams(w).items(): rng[k] = max(rng[k], v)
        lens = sorted(len(w) for w in refw)
        rl = min(lens, key=lambda L: (abs(len(hw) - L), L))
        sys_len += len(hw); ref_len += rl
        for k, v in ngrams(hw).items():
            correct[len(k)-1] += min(v, rng.get(k, 0)); total[len(k)-1] += v
    bp = 1.0 if sys_len >= ref_len else (math.exp(1 - ref_len / sys_len) if sys_len > 0 else 0.0)
    prec = [0.0]*4
    if not any(correct):
        score = 0.0
    else:
        sm = 1.0
        for n in range(4):
            if total[n] == 0: break
            if correct[n] == 0:
                sm *= 2; prec[n] = 100. / (sm * total[n])
            else: prec[n] = 100. * correct[n] / total[n]
        score = bp * math.exp(sum(math.log(p) if p > 0 else -9999999999 for p in prec) / 4)
    ratio = sys_len / ref_len if ref_len else 0
    return f"BLEU = {score:.2f} " + "/".join(f"{p:.1f}" for p in prec) + f" (BP = {bp:.3f} ratio = {ratio:.3f} hyp_len = {sys_len:d} ref_len = {ref_len:d})", score
cases = {
 'perfect': (["The cat sat on the mat.", "A dog runs in the park."], [["The cat sat on the mat.", "A dog runs in the park."]], False),
 'empty_hyp': ([""], [["The cat sat on the mat."]], False),
 'longer_hyp': (["The small cat sat on the red mat today , yes ."], [["The cat sat on the mat."]], False),
 'multi_ref': (["The cat is on the mat.", "There is a dog in the park."], [["The cat sat on the mat.", "A dog is playing in the park."], ["There is a cat on the mat.", "There is a dog in a park."]], False),
 'unicode_punct': (["„Hallo“, sagte er – dann ging er…"], [["„Hallo“, sagte er – und dann ging er…"]], False),
 'lowercase_off': (["THE CAT SAT ON THE MAT . Ärger"], [["the cat sat on the mat . ärger"]], False),
 'lowercase_on': (["THE CAT SAT ON THE MAT . Ärger"], [["the cat sat on the mat . ärger"]], True),
 'smoothing': (["a b c d", "e f"], [["a b x d", "e f g"]], False),
 'corpus': (["Two young men are playing frisbee in the park.", "A woman, wearing a red hat, is 3.5 meters away.", "Der Hund &quot;Rex&quot; bellt!"],
            [["Two young guys play frisbee in a park.", "A woman in a red hat is 3.5 meters away.", "The dog \"Rex\" barks!"]], False),
}
for name, (h, r, lc) in cases.items():
    print(name, '|', bleu(h, r, lc)[0], '|', repr(bleu(h, r, lc)[1]))
for s in ["Hello, world!", "&quot;Hi&quot; &amp; bye &lt;3 &gt;", "3.5 and 1,000 but end. Also a,b", "2-3 well-known x-ray 10-", "a/b (c) [d] {e} it's $5 #1 @x", "„Zitat“ — ‚so‘ …", "line<skipped>one", "tab\there\u00a0nbsp  spaces"]:
    print(repr(s), '->', repr(tok13a(s)))
print(repr("ÄÖÜ ẞ Σ İ".lower()))
