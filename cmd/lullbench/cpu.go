package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// cpuSeconds is the CPU time (user and system) used so far by lull and by
// the processes of the benchmark's PostgreSQL, whose postmaster is
// postmaster. On a machine shared with other work the wall time of a
// request varies with the neighbours' load, several times over; the CPU
// time it costs varies far less, so the fan-out reports both.
func (b *bench) cpuSeconds() (lull, pg float64) {
	lull = procCPU(strconv.Itoa(b.lull.cmd.Process.Pid))
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if e.Name() == b.postmaster || procField(e.Name(), 1) == b.postmaster {
			pg += procCPU(e.Name())
		}
	}
	return lull, pg
}

// procCPU is a process's utime + stime in seconds (USER_HZ is 100 on Linux).
func procCPU(pid string) float64 {
	u, _ := strconv.Atoi(procField(pid, 11))
	s, _ := strconv.Atoi(procField(pid, 12))
	return float64(u+s) / 100
}

// procField is field i of /proc/pid/stat after the command name: 1 is the
// parent's pid, 11 and 12 utime and stime.
func procField(pid string, i int) string {
	b, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return ""
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if i >= len(f) {
		return ""
	}
	return f[i]
}

// postmasterPID reads the pid of the cluster's postmaster from its data
// folder.
func postmasterPID(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, "data", "postmaster.pid"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0])
}
