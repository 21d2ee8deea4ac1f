"""Test and rehearsal tools that need no MPI: real hosts on one machine (``netns``)."""
