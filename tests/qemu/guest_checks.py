"""What the commands of tests/qemu/nvme-guest left behind (N.status, N.stdout, N.stderr under
its --out directory), read back as checks: one printed line each, the failures counted, exit 1
at the end if any failed. Shared by check-health and check-aarch64."""

import json
import pathlib
import sys


class Checks:
    def __init__(self, out, name):
        self.out = pathlib.Path(out)
        self.name = name
        self.failures = []

    def check(self, what, ok, detail=""):
        """Prints `ok` or `FAIL` and what was checked, with the detail when it failed."""
        shown = (": " + str(detail).strip()) if detail and not ok else ""
        print(f"{'ok  ' if ok else 'FAIL'} {what}{shown}")
        if not ok:
            self.failures.append(what)
        return ok

    def result(self, index, what, parse=True, status_wanted=0):
        """(status, stdout, parsed JSON or None) of command `index`; a command that ends with
        another status than `status_wanted`, or prints no JSON where JSON is wanted, is a
        failed check."""
        status = int((self.out / f"{index}.status").read_text())
        text = (self.out / f"{index}.stdout").read_text()
        err = (self.out / f"{index}.stderr").read_text()
        runs = "runs" if status_wanted == 0 else f"exits {status_wanted}"
        self.check(f"{what} {runs}", status == status_wanted,
                   f"exit {status}: {(err + text)[-2000:]}")
        if status != status_wanted or not parse:
            return status, text, None
        try:
            return status, text, json.loads(text)
        except ValueError as error:
            self.check(f"{what} prints JSON", False, f"{error}: {text[:300]!r}")
            return status, text, None

    def finish(self):
        if self.failures:
            print(f"{self.name}: {len(self.failures)} check(s) failed")
            sys.exit(1)
        print(f"{self.name}: every check passed")
