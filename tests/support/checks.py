"""The check-and-count helper of the Python test scripts (tests/mpi, tests/qcschema, tests/python): one line per check,
'ok' or 'FAIL', and the count of failures for the exit code."""


class Checker:
    def __init__(self):
        self.failed = 0

    def check(self, ok, what):
        print("%s %s" % ("ok  " if ok else "FAIL", what))
        self.failed += 0 if ok else 1
        return ok

    def raises(self, kind, text, f, what):
        """That f() raises `kind` with `text` in its message."""
        try:
            f()
        except kind as e:
            return self.check(text in str(e), "%s: %s (%s)" % (what, kind.__name__, e))
        except Exception as e:  # noqa: BLE001 -- the wrong class is the failure being tested
            return self.check(False, "%s: expected %s, got %s: %s" % (what, kind.__name__, type(e).__name__, e))
        return self.check(False, "%s: expected %s, nothing raised" % (what, kind.__name__))
