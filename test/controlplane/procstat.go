package controlplane

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ProcessMemoryMiB reads a kB field of /proc/<pid>/status ("VmRSS",
// "VmHWM" for the peak) in MiB, for the processes Spawn starts.
func ProcessMemoryMiB(pid int, field string) (float64, error) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				return 0, fmt.Errorf("parsing %q: %w", line, err)
			}
			return kb / 1024, nil
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// ProcessCPUSeconds is the user plus system CPU a process has used, in
// seconds (/proc/<pid>/stat fields 14 and 15, in clock ticks of 1/100 s on
// Linux).
func ProcessCPUSeconds(pid int) (float64, error) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; fields after it follow ")".
	rest := string(raw)
	if i := strings.LastIndexByte(rest, ')'); i >= 0 {
		rest = rest[i+1:]
	}
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	utime, err1 := strconv.ParseFloat(f[11], 64)
	stime, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("parsing /proc/%d/stat: %q %q", pid, f[11], f[12])
	}
	return (utime + stime) / 100, nil
}
