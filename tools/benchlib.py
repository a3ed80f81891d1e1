"""What the benchmark scripts share: a description of the machine for the
results they print."""
import os
import platform


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
