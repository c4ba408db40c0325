package main

import (
	"bufio"
	"bytes"
	"net"
	"strings"
	"sync/atomic"
)

// sink is the benchmark's SMTP server: it accepts every message and
// counts it. The tests' server (mail/smtptest, on go-smtp) parses and
// keeps what it receives, and go-smtp reads a message's data one byte at
// a time: about 0.2 ms of CPU per digest, a fifth of this machine's two
// cores at 2,000 emails a second, taken from the lull and PostgreSQL it
// measures. A real relay runs elsewhere, so the sink should cost as
// little as it can: it reads whole lines and answers what lull's client
// says (EHLO, MAIL, RCPT, DATA, RSET, NOOP, QUIT).
type sink struct {
	ln       net.Listener
	received atomic.Int64
}

func listenSink() (*sink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &sink{ln: ln}
	go s.accept()
	return s, nil
}

func (s *sink) URL() string   { return "smtp://" + s.ln.Addr().String() }
func (s *sink) Received() int { return int(s.received.Load()) }
func (s *sink) Close() error  { return s.ln.Close() }

func (s *sink) accept() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		go s.serve(c)
	}
}

// serve answers one connection until QUIT or an error.
func (s *sink) serve(c net.Conn) {
	defer c.Close()
	r, w := bufio.NewReaderSize(c, 64<<10), bufio.NewWriter(c)
	answer := func(line string) bool {
		w.WriteString(line + "\r\n")
		return w.Flush() == nil
	}
	if !answer("220 sink ESMTP") {
		return
	}
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return
		}
		verb := ""
		if f := bytes.Fields(line); len(f) > 0 {
			verb = strings.ToUpper(string(f[0]))
		}
		ok := true
		switch verb {
		case "EHLO":
			ok = answer("250-sink\r\n250-8BITMIME\r\n250-SMTPUTF8\r\n250 SIZE 52428800")
		case "HELO", "MAIL", "RCPT", "RSET", "NOOP":
			ok = answer("250 ok")
		case "DATA":
			ok = answer("354 go ahead") && s.data(r) && answer("250 ok: queued")
		case "QUIT":
			answer("221 bye")
			return
		default:
			ok = answer("502 not implemented")
		}
		if !ok {
			return
		}
	}
}

// data reads a message up to its lone dot and counts it.
func (s *sink) data(r *bufio.Reader) bool {
	for start := true; ; {
		line, err := r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			start = false // a line longer than the buffer: read on
			continue
		}
		if err != nil {
			return false
		}
		if start && string(line) == ".\r\n" {
			s.received.Add(1)
			return true
		}
		start = true
	}
}
