"""The fork and job servers listen on abstract Unix sockets (no file permissions) and unpickle
what a client sends, so they serve only their own user (:func:`memtrials.machine.same_user`)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from memtrials.machine import peer_uid, same_user

NOBODY = 65534


def _listener() -> tuple[socket.socket, str]:
    address = f"memtrials-test-peer-{os.getpid()}"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind("\0" + address)
    sock.listen(1)
    return sock, address


def test_a_connection_of_this_user_is_served():
    listener, address = _listener()
    with listener, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.connect("\0" + address)
        conn, _ = listener.accept()
        with conn:
            assert peer_uid(conn) == os.getuid()
            assert same_user(conn)


@pytest.mark.skipif(os.getuid() != 0, reason="connecting as another user needs root to switch users")
def test_a_connection_of_another_user_is_refused():
    listener, address = _listener()
    code = ("import os, socket, sys, time; os.setgid(%d); os.setuid(%d); "
            "s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.connect('\\0' + sys.argv[1]); "
            "time.sleep(5)") % (NOBODY, NOBODY)
    with listener:
        proc = subprocess.Popen([sys.executable, "-c", code, address])
        try:
            listener.settimeout(20)
            conn, _ = listener.accept()
            with conn:
                assert peer_uid(conn) == NOBODY
                assert not same_user(conn)
        finally:
            proc.kill()
            proc.wait()


def test_both_servers_check_the_peer_before_forking():
    """Each server's accept loop refuses another user's connection before it forks."""
    from pathlib import Path

    import memtrials.envs.process.forkserver as forkserver
    import memtrials.pipeline.jobserver as jobserver

    for module in (forkserver, jobserver):
        text = Path(module.__file__).read_text()
        accept = text.index("listener.accept()")
        assert "if same_user(conn):" in text[accept:accept + 200], module.__name__


def test_proc_stat_reads_a_process_and_a_zombie_and_nothing_for_a_gone_one(tmp_path):
    """``memtrials.machine.proc_stat``, the one reader of ``/proc/<pid>/stat`` (the job's start,
    a lent JVM's CPU, the fork server's watchdog): a command name with ``)`` and spaces does not
    shift the fields."""
    import os
    import shutil
    import subprocess
    import sys
    import time

    from memtrials.machine import proc_stat

    proc = subprocess.Popen([sys.executable, "-c", "import time, sys; sys.stdout.write('x'); sys.stdout.flush(); "
                             "t = time.process_time()\nwhile time.process_time() - t < 0.3: pass\n"
                             "time.sleep(30)"], stdout=subprocess.PIPE)
    try:
        assert proc.stdout.read(1) == b"x"
        time.sleep(0.5)
        fields = proc_stat(proc.pid)
        assert fields[0] in "SR" and int(fields[11]) + int(fields[12]) > 0  # state; user + system ticks
    finally:
        proc.kill()
    time.sleep(0.2)
    assert proc_stat(proc.pid)[0] == "Z"  # killed, not reaped yet
    proc.wait()
    assert proc_stat(proc.pid) is None
    assert proc_stat()[0] == "R" and int(proc_stat()[19]) > 0 and proc_stat(os.getpid()) is not None
    link = tmp_path / "a) b (c"  # the command name comes from the executed file's name
    link.symlink_to(shutil.which("sleep"))
    odd = subprocess.Popen([str(link), "30"])
    try:
        time.sleep(0.3)
        assert open(f"/proc/{odd.pid}/comm").read().strip() == "a) b (c"
        assert proc_stat(odd.pid)[0] in "SR" and proc_stat(odd.pid)[1] == str(os.getpid())  # [1]: the parent
    finally:
        odd.kill()
        odd.wait()
