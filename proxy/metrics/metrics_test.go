package metrics

import (
	"crypto/x509"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// values gathers reg and returns each series of family name as
// "label=value,..." -> value.
func values(t *testing.T, reg *prometheus.Registry, name string) map[string]float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			key := ""
			for _, l := range m.GetLabel() {
				key += l.GetName() + "=" + l.GetValue()
			}
			switch {
			case m.Gauge != nil:
				out[key] = m.GetGauge().GetValue()
			case m.Counter != nil:
				out[key] = m.GetCounter().GetValue()
			}
		}
	}
	return out
}

func TestStateGauges(t *testing.T) {
	m := New()
	for _, name := range []string{"tailplane_proxy_ready", "tailplane_proxy_tailnet_online"} {
		if got := values(t, m.Registry, name); got[""] != 0 || len(got) != 1 {
			t.Errorf("%s before SetState = %v, want one series at 0", name, got)
		}
	}
	m.SetState(func() bool { return true }, func() bool { return false })
	if got := values(t, m.Registry, "tailplane_proxy_ready")[""]; got != 1 {
		t.Errorf("ready = %v, want 1", got)
	}
	if got := values(t, m.Registry, "tailplane_proxy_tailnet_online")[""]; got != 0 {
		t.Errorf("online = %v, want 0", got)
	}
}

func TestCertificates(t *testing.T) {
	m := New()
	exp := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	m.CertificateObtained("App.Example.ts.net.", &x509.Certificate{NotAfter: exp})
	m.CertificateObtained("other.example.ts.net", nil) // nothing to record
	m.CertificateFailed("bad.example.ts.net")
	m.CertificateFailed("bad.example.ts.net")
	expiry := values(t, m.Registry, "tailplane_proxy_certificate_expiry_timestamp_seconds")
	if len(expiry) != 1 || expiry["name=app.example.ts.net"] != float64(exp.Unix()) {
		t.Errorf("expiry = %v, want app.example.ts.net at %d", expiry, exp.Unix())
	}
	errs := values(t, m.Registry, "tailplane_proxy_certificate_renewal_errors_total")
	want := map[string]float64{"name=app.example.ts.net": 0, "name=bad.example.ts.net": 2}
	if len(errs) != len(want) || errs["name=app.example.ts.net"] != 0 || errs["name=bad.example.ts.net"] != 2 {
		t.Errorf("renewal errors = %v, want %v", errs, want)
	}
}
