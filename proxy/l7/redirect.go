package l7

import (
	"net"
	"net/http"
)

// RedirectHandler answers every request with 301 to the same host and URI
// over HTTPS (port 443, so any port in Host is dropped).
func RedirectHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		http.Redirect(w, r, "https://"+host+r.URL.RequestURI(), http.StatusMovedPermanently)
	})
}
