package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/charmbracelet/log"

	"github.com/tailplane/tailplane/internal/nameserver"
)

// badArgs is a command line the nameserver does not take (exit status 2).
type badArgs struct{ error }

// runNameserver serves the DNSConfig records until ctx ends. The defaults
// are the official nameserver's (records at /config/records.json, port
// 1053), so the operator's Deployment runs either image. -h prints the
// flags to stdout and returns flag.ErrHelp; a bad command line is a
// badArgs.
func runNameserver(ctx context.Context, args []string, stdout io.Writer, logger *log.Logger) error {
	fs := flag.NewFlagSet("tailplane-proxy nameserver", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	records := fs.String("records", nameserver.DefaultRecordsPath, "the records file (the mounted dnsrecords ConfigMap's records.json)")
	listen := fs.String("listen", nameserver.DefaultListen, "UDP and TCP address to answer on")
	zone := fs.String("zone", nameserver.DefaultZone, "the domain answered for; other names are REFUSED")
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprintln(stdout, "Usage: tailplane-proxy nameserver [flags]: answer the DNSConfig records\n\nFlags:")
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return err
	case err != nil:
		return badArgs{err}
	case fs.NArg() > 0:
		return badArgs{fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	s := &nameserver.Server{Path: *records, Zone: *zone, Log: logger}
	logger.Info("answering", "addr", *listen, "zone", *zone, "records", *records)
	return s.ListenAndServe(ctx, *listen)
}
