package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/charmbracelet/log"

	"github.com/tailplane/tailplane/internal/nameserver"
)

// runNameserver serves the DNSConfig records until ctx ends. The defaults
// are the official nameserver's (records at /config/records.json, port
// 1053), so the operator's Deployment runs either image.
func runNameserver(ctx context.Context, args []string, logger *log.Logger) error {
	fs := flag.NewFlagSet("nameserver", flag.ContinueOnError)
	records := fs.String("records", nameserver.DefaultRecordsPath, "the records file (the mounted dnsrecords ConfigMap's records.json)")
	listen := fs.String("listen", nameserver.DefaultListen, "UDP and TCP address to answer on")
	zone := fs.String("zone", nameserver.DefaultZone, "the domain answered for; other names are REFUSED")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("nameserver flags: %w", err)
	}
	s := &nameserver.Server{Path: *records, Zone: *zone, Log: logger}
	logger.Info("answering", "addr", *listen, "zone", *zone, "records", *records)
	return s.ListenAndServe(ctx, *listen)
}
