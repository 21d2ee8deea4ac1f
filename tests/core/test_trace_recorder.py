"""core.trace.Recorder for a process without steps of its own (a parameter server)."""

from mpicomm.core.trace import Recorder


def test_a_stepless_recorder_keeps_to_the_window_and_writes_on_leaving_it():
    """A server records the pushes of the --trace-steps steps (before: the whole run), and
    writes them out when it leaves the window, as the workers do (before: only at the end,
    so a failure after the window lost the server's part)."""
    written = []
    rec = Recorder(enabled=False, steps=(2, 4))
    rec.flush = lambda: (written.append(len(rec.events)), rec.events.clear())
    for step in range(6):
        rec.at_step(step)
        rec.complete(f"apply step {step}", "server", 0.0, 1.0)
    assert written == [2]  # steps 2 and 3, written once on reaching step 4
    assert rec.events == [] and not rec.enabled
    free = Recorder()  # no window: at_step changes nothing
    free.at_step(10**6)
    assert free.enabled
