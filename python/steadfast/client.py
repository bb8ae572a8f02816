"""A REST client for scripts and CI: create an experiment, wait for it, read its trials and
metrics, kill it. Standard library only (urllib).

    import steadfast
    client = steadfast.Client()                       # $SF_MASTER, $SF_TOKEN, $SF_CA_FILE
    exp = client.create_experiment("exp.yaml")
    print(client.wait(exp, timeout=3600)["state"])

Where it finds the master, as the `sf` CLI does (cli/cli_defaults.h): the `url` argument, then
$SF_MASTER, then "master" in the CLI defaults file ($XDG_CONFIG_HOME/steadfast/cli.json, else
~/.config/steadfast/cli.json, which `sf deploy local up` writes), then http://127.0.0.1:8080.
The CA that verifies an https:// master: the `ca_file` argument, then $SF_CA_FILE, then the
file's "ca_file" when its "master" was taken, else the system's CAs. The API token (sent as
``Authorization: Bearer``): the `token` argument, then $SF_TOKEN, then the session `sf login`
saved for that master URL (sessions.json beside cli.json, common/api/session_store.h).
"""

from __future__ import annotations

import base64
import getpass
import json
import os
import re
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Iterable, Optional, Union

from ._context_archive import pack_context

__all__ = ["ApiError", "Client", "cli_defaults_path", "resolve_master", "session_token",
           "sessions_path"]

DEFAULT_MASTER = "http://127.0.0.1:8080"
TERMINAL_STATES = frozenset({"EXPERIMENT_STATE_COMPLETED", "EXPERIMENT_STATE_CANCELED",
                             "EXPERIMENT_STATE_ERROR"})


class ApiError(Exception):
    """The master refused a request (`status`: its HTTP status; `message`: its reason; `errors`:
    the config errors, for an invalid experiment config), or could not be reached (`status` 0).
    """

    def __init__(self, status: int, message: str, *, method: str = "", path: str = "",
                 errors: Optional[list[dict[str, Any]]] = None) -> None:
        where = f"{method} {path}: " if method else ""
        super().__init__(f"{where}{message}" + (f" (HTTP {status})" if status else ""))
        self.status = status
        self.message = message
        self.errors = errors or []


def cli_defaults_path() -> str:
    """$XDG_CONFIG_HOME/steadfast/cli.json (when absolute), else ~/.config/steadfast/cli.json."""
    base = os.environ.get("XDG_CONFIG_HOME", "")
    if not base.startswith("/"):
        home = os.environ.get("HOME", "")
        base = f"{home}/.config" if home else "/tmp/.config"
    return f"{base}/steadfast/cli.json"


def sessions_path() -> str:
    """Where `sf login` keeps its sessions: sessions.json beside cli.json."""
    return os.path.join(os.path.dirname(cli_defaults_path()), "sessions.json")


def session_token(url: str) -> str:
    """The token of the session `sf login` saved for the master at `url` (as resolve_master
    gives it), or "" when there is none. A missing or unreadable file is no session, as for
    the CLI."""
    try:
        with open(sessions_path(), encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return ""
    sessions = data.get("sessions") if isinstance(data, dict) else None
    entry = sessions.get(url) if isinstance(sessions, dict) else None
    token = entry.get("token") if isinstance(entry, dict) else None
    return token if isinstance(token, str) else ""


def _read_cli_defaults(path: str) -> dict[str, str]:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:
        raise ValueError(f"sf defaults file {path}: cannot read it as JSON: {e}") from None
    if not isinstance(data, dict):
        raise ValueError(f"sf defaults file {path}: not a JSON object like "
                         f'{{"master": "https://127.0.0.1:8080", "ca_file": "..."}}')
    out = {}
    for key in ("master", "ca_file"):
        v = data.get(key)
        if v is None:
            continue
        if not isinstance(v, str):
            raise ValueError(f'sf defaults file {path}: "{key}" must be a string')
        out[key] = v
    return out


def resolve_master(url: Optional[str] = None, ca_file: Optional[str] = None) -> tuple[str, str]:
    """(master URL, CA file or "") as the module docstring says. Raises ValueError for a
    defaults file that is not a JSON object of strings."""
    resolved = url or os.environ.get("SF_MASTER", "")
    file_ca = ""
    if not resolved:
        defaults = _read_cli_defaults(cli_defaults_path())
        if defaults.get("master"):
            resolved = defaults["master"]
            file_ca = defaults.get("ca_file", "")
    if not resolved:
        resolved = DEFAULT_MASTER
    if "://" not in resolved:
        resolved = "http://" + resolved
    return resolved.rstrip("/"), ca_file or os.environ.get("SF_CA_FILE", "") or file_ca


def _looks_like_path(text: str) -> bool:
    return "\n" not in text and (os.path.isfile(text) or text.endswith((".yaml", ".yml")))


_TOP_KEY = r"^{key}\s*:\s*(.*?)\s*(?:#.*)?$"


def _top_level(config_yaml: str, key: str) -> Optional[str]:
    """A top-level key's value in a YAML (or JSON) config: "" when present without an inline
    value, None when absent. Read without a YAML library: top-level means column 0."""
    try:
        data = json.loads(config_yaml)
    except ValueError:
        data = None
    if isinstance(data, dict):
        v = data.get(key)
        return None if v is None else (v if isinstance(v, str) else json.dumps(v))
    m = re.search(_TOP_KEY.format(key=re.escape(key)), config_yaml, re.MULTILINE)
    if not m:
        return None
    value = m.group(1)
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        value = value[1:-1]
    return value


class Client:
    """The master's REST API. Each method raises ApiError when the master refuses the request
    or cannot be reached; none retries. Thread-safe (no state besides the settings)."""

    def __init__(self, url: Optional[str] = None, token: Optional[str] = None,
                 ca_file: Optional[str] = None, timeout: float = 60.0) -> None:
        self.url, self.ca_file = resolve_master(url, ca_file)
        self.token = token if token is not None else (os.environ.get("SF_TOKEN", "")
                                                       or session_token(self.url))
        self.timeout = timeout
        handlers: list[urllib.request.BaseHandler] = [urllib.request.ProxyHandler({})]
        if self.url.startswith("https://"):
            try:
                context = ssl.create_default_context(cafile=self.ca_file or None)
            except (OSError, ssl.SSLError) as e:
                raise ValueError(f"CA file {self.ca_file}: {e}") from None
            handlers.append(urllib.request.HTTPSHandler(context=context))
        # No proxy from the environment: the master is reached directly, as `sf` reaches it.
        self._opener = urllib.request.build_opener(*handlers)

    def __repr__(self) -> str:
        return f"Client(url={self.url!r})"

    def request(self, method: str, path: str, body: Optional[dict[str, Any]] = None) -> Any:
        """One call: `path` under the master's URL, `body` sent as JSON; the answer's JSON."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        try:
            user = os.environ.get("USER") or getpass.getuser()
        except Exception:
            user = ""
        if user:
            req.add_header("X-SF-User", user)  # the submitter, for a master without accounts
        try:
            with self._opener.open(req, timeout=self.timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as e:
            raw = e.read()
            message, errors = f"HTTP {e.code}", []
            try:
                answer = json.loads(raw)
            except ValueError:
                answer = None
            if isinstance(answer, dict):
                nested = answer.get("error")
                if isinstance(nested, dict):  # {"error": {"message": ...}}
                    answer = nested
                message = str(answer.get("message") or message)
                errors = answer.get("errors") or []
            elif raw:
                message = raw.decode(errors="replace").strip()[:500]
            raise ApiError(e.code, message, method=method, path=path, errors=errors) from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise ApiError(0, f"cannot reach the master at {self.url}: {reason}", method=method,
                           path=path) from None
        if not raw:
            return {}
        try:
            return json.loads(raw)
        except ValueError:
            raise ApiError(0, f"the master's answer is not JSON: {raw[:200]!r}", method=method,
                           path=path) from None

    def create_experiment(self, yaml_or_path: Union[str, os.PathLike[str]], activate: bool = True,
                          workspace: str = "") -> int:
        """Creates an experiment from a YAML file's path or YAML text; returns its id.

        With an `entrypoint`, the context directory (`context_directory` in the config,
        relative to the YAML file; default: the YAML file's directory, or the working directory
        for text) is packed with its .sfignore and sent along (ValueError above 96 MiB).
        """
        text = os.fspath(yaml_or_path)
        base = os.getcwd()
        if isinstance(yaml_or_path, os.PathLike) or _looks_like_path(text):
            with open(text, encoding="utf-8") as f:
                config_yaml = f.read()
            base = os.path.dirname(os.path.abspath(text))
        else:
            config_yaml = text
        body: dict[str, Any] = {"config_yaml": config_yaml, "activate": activate,
                                "workspace": workspace}
        if _top_level(config_yaml, "entrypoint") is not None:
            context = _top_level(config_yaml, "context_directory") or "."
            directory = os.path.normpath(os.path.join(base, os.path.expanduser(context)))
            body["context"] = base64.b64encode(pack_context(directory)).decode()
        answer = self.request("POST", "/api/v1/experiments", body)
        return int(answer["experiment"]["id"])

    def experiment(self, experiment_id: int) -> dict[str, Any]:
        """The experiment (protobuf JSON: lowerCamelCase names, int64 as strings)."""
        return self.request("GET", f"/api/v1/experiments/{int(experiment_id)}")["experiment"]

    def trials(self, experiment_id: int) -> list[dict[str, Any]]:
        """Every trial of the experiment (all pages)."""
        out: list[dict[str, Any]] = []
        while True:
            answer = self.request("GET", f"/api/v1/experiments/{int(experiment_id)}/trials"
                                         f"?offset={len(out)}")
            page = answer.get("trials", [])
            out.extend(page)
            total = int((answer.get("pagination") or {}).get("total", 0) or 0)
            if not page or len(out) >= total:
                return out

    def metrics(self, trial_id: int, kind: str = "training") -> list[dict[str, Any]]:
        """The trial's metric reports of `kind` ("training" or "validation"), by step."""
        q = urllib.parse.urlencode({"kind": kind})
        return self.request("GET", f"/api/v1/trials/{int(trial_id)}/metrics?{q}").get("metrics", [])

    def wait(self, experiment_id: int, timeout: Optional[float] = None,
             interval: float = 1.0) -> dict[str, Any]:
        """The experiment once it is COMPLETED, CANCELED or ERROR; TimeoutError after `timeout`
        seconds (None: no limit)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            exp = self.experiment(experiment_id)
            state = exp.get("state", "")
            if state in TERMINAL_STATES:
                return exp
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"experiment {experiment_id} is still {state} after "
                                   f"{timeout} s")
            time.sleep(interval if deadline is None
                       else max(0.0, min(interval, deadline - time.monotonic())))

    def kill(self, ids: Union[int, Iterable[int]]) -> list[dict[str, Any]]:
        """Kills experiments; one result per id ({"id", "ok", "code", "error", "state"})."""
        id_list = [int(ids)] if isinstance(ids, int) else [int(i) for i in ids]
        return self.request("POST", "/api/v1/experiments/kill", {"ids": id_list}).get("results", [])

    def create_unmanaged_trial(self, config_yaml: str, workspace: str = "") -> dict[str, Any]:
        """An experiment of one trial for a script run by hand (unmanaged mode): the
        CreateUnmanagedTrialResponse's JSON (taskId, taskToken, trialLinkAddress, ...)."""
        return self.request("POST", "/api/v1/unmanaged-trials",
                            {"config_yaml": config_yaml, "workspace": workspace})
