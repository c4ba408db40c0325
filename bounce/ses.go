package bounce

import (
	"cmp"
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/mail"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// snsSkew is how old an SNS message may be. SNS keeps a message's
// timestamp through its retries, which its default policy spreads over
// minutes and custom policies over up to an hour.
const snsSkew = time.Hour

// snsHost is where SNS publishes its signing certificates (and where its
// SubscribeURLs point): nowhere else is trusted. The middle label must be
// a region's name, not any label: sns.s3.amazonaws.com and
// sns.s3-us-west-2.amazonaws.com are an S3 bucket named "sns", whose
// owner could serve a certificate of their own there.
var snsHost = regexp.MustCompile(`^sns\.[a-z]{2}(-[a-z]+)+-[0-9]+\.amazonaws\.com$`)

// snsCertPath is the path of SNS's signing certificates: nothing else on
// an SNS host is a certificate, and a path or query of the sender's
// choosing would make every forged request fetch a fresh URL.
var snsCertPath = regexp.MustCompile(`^/SimpleNotificationService-[A-Za-z0-9]+\.pem$`)

// CertFetcher returns the certificate at an SNS SigningCertURL. It is
// only asked for https URLs on an sns.<region>.amazonaws.com host.
type CertFetcher func(ctx context.Context, url string) (*x509.Certificate, error)

// snsMessage is an SNS HTTP(S) delivery.
type snsMessage struct {
	Type             string
	MessageId        string
	Token            string
	TopicArn         string
	Subject          *string // absent and empty differ in what is signed
	Message          string
	Timestamp        string
	SignatureVersion string
	Signature        string
	SigningCertURL   string `json:"SigningCertURL"`
	SubscribeURL     string `json:"SubscribeURL"`
}

// sesNotification is the Message of an SES bounce or complaint, as
// notifications ("notificationType") or event publishing ("eventType")
// send it.
type sesNotification struct {
	NotificationType string `json:"notificationType"`
	EventType        string `json:"eventType"`
	Bounce           *struct {
		BounceType        string `json:"bounceType"`
		Timestamp         string `json:"timestamp"`
		BouncedRecipients []struct {
			EmailAddress   string `json:"emailAddress"`
			Status         string `json:"status"`
			DiagnosticCode string `json:"diagnosticCode"`
		} `json:"bouncedRecipients"`
	} `json:"bounce"`
	Complaint *struct {
		ComplainedRecipients []struct {
			EmailAddress string `json:"emailAddress"`
		} `json:"complainedRecipients"`
		ComplaintFeedbackType string `json:"complaintFeedbackType"`
		Timestamp             string `json:"timestamp"`
		UserAgent             string `json:"userAgent"`
	} `json:"complaint"`
	Mail struct {
		Source        string `json:"source"`
		CommonHeaders struct {
			ReturnPath string `json:"returnPath"`
		} `json:"commonHeaders"`
	} `json:"mail"`
}

// ses reads Amazon SES notifications delivered by SNS.
type ses struct {
	topics  []string
	confirm bool
	certs   CertFetcher
	verp    VERP
	logger  *slog.Logger
	// visit follows a SubscribeURL; nil uses the network.
	visit func(ctx context.Context, url string) error
}

func (s *ses) decode(ctx context.Context, _ *http.Request, body []byte, now time.Time) ([]Report, error) {
	var m snsMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, &signatureError{"body", "not an SNS message"}
	}
	if err := s.verify(ctx, &m, now); err != nil {
		return nil, err
	}
	switch m.Type {
	case "SubscriptionConfirmation":
		return nil, s.subscribe(ctx, &m)
	case "UnsubscribeConfirmation":
		s.logger.Warn("webhook: SES topic unsubscribed lull", "topic", m.TopicArn)
		return nil, nil
	}
	var n sesNotification
	if err := json.Unmarshal([]byte(m.Message), &n); err != nil {
		return nil, &payloadError{"Message", "not an SES notification"}
	}
	batch := s.batch(&n)
	var out []Report
	switch typ := n.NotificationType + n.EventType; {
	case typ == "Bounce" && n.Bounce != nil:
		at := eventTime(n.Bounce.Timestamp, 0, now)
		kind := Soft // Transient and Undetermined
		if n.Bounce.BounceType == "Permanent" {
			kind = Hard
		}
		for _, r := range n.Bounce.BouncedRecipients {
			if a := address(r.EmailAddress); a != "" {
				status := r.Status
				if !statusCode.MatchString(status) {
					status = statusIn(r.DiagnosticCode)
				}
				out = append(out, Report{Address: a, Kind: kind, Status: status, BatchID: batch, Detail: clip(r.DiagnosticCode), At: at})
			}
		}
	case typ == "Complaint" && n.Complaint != nil:
		ft := cmp.Or(n.Complaint.ComplaintFeedbackType, "abuse")
		if ft == "not-spam" {
			return nil, nil
		}
		for _, r := range n.Complaint.ComplainedRecipients {
			if a := address(r.EmailAddress); a != "" {
				out = append(out, Report{Address: a, Kind: Complaint, Status: ft, BatchID: batch, Detail: clip(n.Complaint.UserAgent),
					At: eventTime(n.Complaint.Timestamp, 0, now)})
			}
		}
	}
	return out, nil
}

// batch reads the batch from the envelope sender SES reports.
func (s *ses) batch(n *sesNotification) int64 {
	for _, a := range []string{n.Mail.Source, n.Mail.CommonHeaders.ReturnPath} {
		if p, err := mail.ParseAddress(a); err == nil {
			a = p.Address
		}
		if id, ok := s.verp.Batch(a); ok {
			return id
		}
	}
	return 0
}

// verify checks an SNS message as AWS documents: the topic is one of
// ours, the message is recent, the certificate comes from SNS over
// https, and its key signed the message's canonical string (SHA1 for
// SignatureVersion 1, SHA256 for 2).
func (s *ses) verify(ctx context.Context, m *snsMessage, now time.Time) error {
	if !slices.Contains(s.topics, m.TopicArn) {
		return &signatureError{"TopicArn", "not a topic lull is configured for"}
	}
	ts, err := time.Parse(time.RFC3339Nano, m.Timestamp)
	if err != nil {
		return &signatureError{"Timestamp", "not an RFC 3339 time"}
	}
	if err := withinSkew("Timestamp", ts.Unix(), now, snsSkew); err != nil {
		return err
	}
	var hash crypto.Hash
	switch m.SignatureVersion {
	case "1":
		hash = crypto.SHA1
	case "2":
		hash = crypto.SHA256
	default:
		return &signatureError{"SignatureVersion", "must be 1 or 2"}
	}
	if !snsCertURL(m.SigningCertURL) {
		return &signatureError{"SigningCertURL", "not an SNS certificate's https URL"}
	}
	sig, err := base64.StdEncoding.DecodeString(m.Signature)
	if err != nil || len(sig) == 0 {
		return &signatureError{"Signature", "not base64"}
	}
	toSign, err := m.canonical()
	if err != nil {
		return err
	}
	cert, err := s.certs(ctx, m.SigningCertURL)
	if err != nil {
		// Not the sender's fault, maybe: SNS retries a 5xx.
		return fmt.Errorf("SNS signing certificate: %w", err)
	}
	if now.Before(cert.NotBefore) || now.After(cert.NotAfter) {
		return &signatureError{"SigningCertURL", "certificate not valid now"}
	}
	pub, ok := cert.PublicKey.(*rsa.PublicKey)
	if !ok {
		return &signatureError{"SigningCertURL", "not an RSA certificate"}
	}
	var digest []byte
	if hash == crypto.SHA1 {
		d := sha1.Sum(toSign)
		digest = d[:]
	} else {
		d := sha256.Sum256(toSign)
		digest = d[:]
	}
	if rsa.VerifyPKCS1v15(pub, hash, digest, sig) != nil {
		return &signatureError{"Signature", "does not match"}
	}
	return nil
}

// canonical is the string SNS signs: chosen fields as "name\nvalue\n",
// in byte order of their names.
func (m *snsMessage) canonical() ([]byte, error) {
	var b strings.Builder
	add := func(k, v string) { b.WriteString(k + "\n" + v + "\n") }
	switch m.Type {
	case "Notification":
		add("Message", m.Message)
		add("MessageId", m.MessageId)
		if m.Subject != nil {
			add("Subject", *m.Subject)
		}
		add("Timestamp", m.Timestamp)
		add("TopicArn", m.TopicArn)
		add("Type", m.Type)
	case "SubscriptionConfirmation", "UnsubscribeConfirmation":
		add("Message", m.Message)
		add("MessageId", m.MessageId)
		add("SubscribeURL", m.SubscribeURL)
		add("Timestamp", m.Timestamp)
		add("Token", m.Token)
		add("TopicArn", m.TopicArn)
		add("Type", m.Type)
	default:
		return nil, &signatureError{"Type", "not an SNS message type"}
	}
	return []byte(b.String()), nil
}

// subscribe handles a verified SubscriptionConfirmation: by default the
// operator confirms (the URL is logged), because visiting URLs a request
// names is a thing a server should do only when told to.
func (s *ses) subscribe(ctx context.Context, m *snsMessage) error {
	if !s.confirm || !snsURL(m.SubscribeURL) {
		s.logger.Warn("webhook: SES topic asks to confirm the subscription; visit the URL to confirm",
			"topic", m.TopicArn, "subscribe_url", m.SubscribeURL)
		return nil
	}
	visit := s.visit
	if visit == nil {
		visit = visitURL
	}
	if err := visit(ctx, m.SubscribeURL); err != nil {
		return fmt.Errorf("confirm SNS subscription: %w", err)
	}
	s.logger.Info("webhook: SES subscription confirmed", "topic", m.TopicArn)
	return nil
}

// snsURL says whether u is an https URL on an SNS host, with no port
// or credentials to redirect the request elsewhere.
func snsURL(u string) bool {
	p, err := url.Parse(u)
	return err == nil && p.Scheme == "https" && p.User == nil && p.Port() == "" && snsHost.MatchString(p.Host)
}

// snsCertURL says whether u is where SNS keeps a signing certificate.
func snsCertURL(u string) bool {
	p, err := url.Parse(u)
	return err == nil && snsURL(u) && snsCertPath.MatchString(p.Path) && p.RawQuery == "" && p.Fragment == "" && !p.ForceQuery
}

// snsClient follows no redirects: the certificate must come from the
// host that was checked.
var snsClient = &http.Client{
	Timeout:       10 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

func visitURL(ctx context.Context, u string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := snsClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %s", u, resp.Status)
	}
	return nil
}

// fetchCert downloads a PEM certificate from SNS.
func fetchCert(ctx context.Context, u string) (*x509.Certificate, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := snsClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s answered %s", u, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, errors.New("no PEM certificate")
	}
	return x509.ParseCertificate(block.Bytes)
}

// newCertCache remembers certificates by URL: SNS signs with few, and a
// fetch per message would be slow and let a flood of requests make lull
// flood AWS. A certificate is fetched only for a message from one of our
// topics whose URL passed the host check, and the cache stays small.
func newCertCache(fetch CertFetcher) CertFetcher {
	var mu sync.Mutex
	cache := map[string]*x509.Certificate{}
	return func(ctx context.Context, u string) (*x509.Certificate, error) {
		mu.Lock()
		c, ok := cache[u]
		mu.Unlock()
		if ok {
			return c, nil
		}
		c, err := fetch(ctx, u)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		if len(cache) >= 16 {
			clear(cache)
		}
		cache[u] = c
		mu.Unlock()
		return c, nil
	}
}
