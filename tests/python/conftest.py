"""pytest's exit 5 ("no tests collected") is a failure here, said aloud."""


def pytest_sessionfinish(session, exitstatus):
    if exitstatus == 5:
        print("\ntests/python: pytest collected no tests; that is a failure")
        session.exitstatus = 1
