package mail

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

func TestReplyIn(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		text   string
		code   int
		answer string
	}{
		{`550 "5.1.1 no such user"`, 550, "550 5.1.1 no such user"},
		{`451 "4.3.0 try again, later"`, 451, "451 4.3.0 try again, later"},
		{`SMTP AUTH failed: 535 "5.7.8 bad credentials"`, 535, "535 5.7.8 bad credentials"},
		{"421 service not available", 421, "421 service not available"},
		{"554", 554, "554"},
		{"dial tcp 127.0.0.1:465: connect: connection refused", 0, ""},
		{"read tcp 127.0.0.1:5000->127.0.0.1:587: i/o timeout", 0, ""},
		{"not connected to SMTP server", 0, ""},
		{"after 1000 attempts", 0, ""},
	} {
		code, answer, ok := replyIn(tc.text)
		if code != tc.code || answer != tc.answer || ok != (tc.code != 0) {
			t.Errorf("replyIn(%q) = %d, %q, %v; want %d, %q", tc.text, code, answer, ok, tc.code, tc.answer)
		}
	}
}

func TestIsTemporary(t *testing.T) {
	t.Parallel()
	permanent := &SendError{Code: 550, Answer: "550 5.1.1 no such user"}
	temporary := &SendError{Temporary: true, Err: context.DeadlineExceeded}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{permanent, false},
		{fmt.Errorf("send batch 7: %w", permanent), false},
		{temporary, true},
		{errors.New("something else"), true},
	} {
		if got := IsTemporary(tc.err); got != tc.want {
			t.Errorf("IsTemporary(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	if permanent.Error() != "550 5.1.1 no such user" {
		t.Errorf("Error() = %q, want the answer", permanent.Error())
	}
	if !errors.Is(temporary, context.DeadlineExceeded) || temporary.Error() != "smtp: context deadline exceeded" {
		t.Errorf("temporary: Is = %v, Error() = %q", errors.Is(temporary, context.DeadlineExceeded), temporary.Error())
	}
}
