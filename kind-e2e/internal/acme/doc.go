// Package acme runs devcluster's certificate authority: Pebble (the ACME
// test CA) in-process, and the DNS server its validator asks for DNS-01 TXT
// records, which the tailnet's control server fills from the records nodes
// publish when they request a certificate.
//
// Pebble issues from a root and intermediate kept in the cluster folder, so
// a resumed cluster is the same CA.
//
// It may import Pebble, miekg/dns and charmbracelet/log.
package acme
