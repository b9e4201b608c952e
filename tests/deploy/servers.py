"""The agentkv servers deploy_check.py runs: each started on a free loopback port and read until
it says where it serves, and a small HTTP helper to talk to them. Python 3 standard library
only.
"""

import queue
import re
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request

START_TIMEOUT_S = 20.0
HTTP_TIMEOUT_S = 10.0

class Server:
    """One `agentkv` server started on a free loopback port, stopped on exit. A thread reads
    its output (stdout and stderr) to the end, so a chatty server never blocks on the pipe."""

    def __init__(self, argv):
        self.argv = argv
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True)
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.url = self._wait_for_url()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def _wait_for_url(self):
        output = []
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                break
            output.append(line)
            match = re.search(r"serving (http://[0-9.]+:[0-9]+)", line)
            if match:
                return match.group(1)
        self.stop()
        raise RuntimeError("did not start: {}\n{}".format(" ".join(self.argv), "".join(output)))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def http(url, body=None, headers=None):
    request = urllib.request.Request(url, data=body, headers=headers or {},
                                     method="POST" if body is not None else "GET")
    try:
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
