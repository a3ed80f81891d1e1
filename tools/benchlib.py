"""What the benchmark scripts share: timing a command end to end, and a
description of the machine for the results they print."""
import os
import platform
import statistics
import subprocess
import time


def measure(cmd, runs, warmup=3):
    """Wall time of `cmd` in ms over `runs` runs after `warmup`: median, p10, p90, min."""
    for _ in range(warmup):
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append((time.perf_counter() - t0) * 1000.0)
    times.sort()
    return {
        "median": statistics.median(times),
        "p10": times[len(times) // 10],
        "p90": times[(len(times) * 9) // 10],
        "min": times[0],
    }


def machine():
    """CPU model, core count, OS and kernel, e.g. 'AMD EPYC, 2 cores, Linux 6.1'."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}"
