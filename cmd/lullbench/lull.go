package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// lullProcess is lull running as its own process, as in production, so
// its memory is its own and measurable.
type lullProcess struct {
	cmd  *exec.Cmd
	base string
	bin  string
}

const benchKey = "lull_bench_key"

func startLull(ctx context.Context, dbURL, smtpURL string, workers, conns int) (*lullProcess, error) {
	// A folder of its own: another checkout benchmarking on the same
	// machine must not replace the binary between its build and its start.
	dir, err := os.MkdirTemp("", "lull-bench-")
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(dir, "lull")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/lull").CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("build lull: %w\n%s", err, out)
	}
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL, "LULL_SMTP_URL="+smtpURL, "LULL_API_KEY="+benchKey,
		"LULL_ADDR=127.0.0.1:0", fmt.Sprint("LULL_WORKERS=", workers), fmt.Sprint("LULL_SMTP_CONNECTIONS=", conns), "LULL_MAIL_FROM=bench@lull.localhost")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = nil
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &lullProcess{cmd: cmd, bin: bin}
	re := regexp.MustCompile(`listening on (http://\S+)`)
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
	}()
	select {
	case p.base = <-found:
		return p, nil
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		return nil, fmt.Errorf("lull did not start")
	}
}

func (p *lullProcess) stop() {
	p.cmd.Process.Signal(os.Interrupt)
	p.cmd.Wait()
	os.RemoveAll(filepath.Dir(p.bin))
}

// peakRSS is the process's high-water resident memory (VmHWM), in MB.
func (p *lullProcess) peakRSS() float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmHWM:") {
			kb, _ := strconv.Atoi(strings.Fields(l)[1])
			return float64(kb) / 1024
		}
	}
	return 0
}
