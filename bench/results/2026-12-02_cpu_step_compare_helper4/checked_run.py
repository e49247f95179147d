#!/usr/bin/env python3
"""Runs a command and reports how much CPU other processes used meanwhile (system busy time from
/proc/stat minus the command's own, children included): usage: checked_run.py CMD..."""
import os, subprocess, sys, time
def busy():
    v = list(map(int, open('/proc/stat').readline().split()[1:]))
    return (sum(v) - v[3] - v[4]) / os.sysconf('SC_CLK_TCK')
b0 = busy(); t0 = time.time()
p = subprocess.Popen(sys.argv[1:])
_, status, ru = os.wait4(p.pid, 0)
wall = time.time() - t0; other = busy() - b0 - (ru.ru_utime + ru.ru_stime)
print(f"checked_run: wall {wall:.1f} s, own CPU {ru.ru_utime + ru.ru_stime:.1f} s, other processes' CPU {other:.1f} s ({other / wall:.2f} CPUs on average)")
sys.exit(os.waitstatus_to_exitcode(status))
