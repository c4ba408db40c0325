package bounce

import (
	"strings"
	"testing"
)

func TestVERPRoundTrip(t *testing.T) {
	t.Parallel()
	for _, id := range []int64{1, 42, 1<<63 - 1} {
		addr := testVERP.Address(id)
		local, _, _ := strings.Cut(addr, "@")
		if len(local) > 64 {
			t.Errorf("local part of %s is %d characters, over 64", addr, len(local))
		}
		got, ok := testVERP.Batch(addr)
		if !ok || got != id {
			t.Errorf("Batch(%s) = %d, %v; want %d", addr, got, ok, id)
		}
		if got, ok := testVERP.Batch("<" + strings.ToUpper(addr) + ">"); !ok || got != id {
			t.Errorf("Batch of the upper-cased, bracketed %s = %d, %v", addr, got, ok)
		}
	}
}

func TestVERPRefusesForgeries(t *testing.T) {
	t.Parallel()
	good := testVERP.Address(42)
	other := VERP{Domain: testVERP.Domain, Secret: []byte("another installation's secret....")}
	for _, addr := range []string{
		strings.Replace(good, "42-", "43-", 1), // another batch, same MAC
		strings.Replace(good, "42-", "042-", 1),
		other.Address(42),
		strings.Replace(good, "bounces.example.com", "example.org", 1),
		"bounces+42@bounces.example.com",
		"bounces+-0-@bounces.example.com",
		"postmaster@bounces.example.com",
		"", "@", "<>", "bounces+@",
	} {
		if id, ok := testVERP.Batch(addr); ok {
			t.Errorf("Batch(%q) = %d, accepted", addr, id)
		}
	}
	if _, ok := (VERP{Secret: testVERP.Secret}).Batch("bounces+42-x@"); ok {
		t.Error("a VERP without a domain accepted an address")
	}
}
