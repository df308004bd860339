// Command bench-official runs Tailplane side by side with the official
// Tailscale operator on devcluster's real node and prints the compatibility
// and performance tables (go tool task bench:official; see
// bench/official's package comment and docs/performance.md).
//
// It imports bench/official and charmbracelet/log.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/charmbracelet/log"

	official "github.com/tailplane/tailplane/bench/official"
)

func main() {
	logger := log.NewWithOptions(os.Stderr, log.Options{ReportTimestamp: true, Prefix: "bench:official"})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], logger); err != nil {
		logger.Error(err.Error())
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, logger *log.Logger) error {
	var cfg official.Config
	fs := flag.NewFlagSet("bench-official", flag.ContinueOnError)
	fs.StringVar(&cfg.Root, "root", "../..", "the repository")
	fs.StringVar(&cfg.Assets, "assets", "", "folder of devcluster, tailscaled and tailscale (default ROOT/.cache/assets)")
	fs.StringVar(&cfg.Work, "work", "", "the run's folder (default ROOT/.cache/bench-official)")
	fs.IntVar(&cfg.Runs, "runs", 20, "timed exposures per case and operator")
	fs.IntVar(&cfg.Services, "services", 100, "LoadBalancer Services exposed at once for the memory and clean-up lines (0: leave out)")
	fs.DurationVar(&cfg.LoadFor, "load", 10*time.Second, "L7 load duration per proxy")
	fs.IntVar(&cfg.LoadWorkers, "clients", 8, "concurrent L7 clients")
	fs.StringVar(&cfg.SocksAddr, "socks", "127.0.0.1:1056", "address of the devcluster join SOCKS5 proxy")
	cases := fs.String("cases", "", "comma-separated parts to run: "+strings.Join(official.AllCases(), ",")+" (default all)")
	out := fs.String("out", "", "also write the report to this file (default WORK/report.md)")
	skipBuild := fs.Bool("skip-build", false, "use the images of the last run")
	buildOnly := fs.Bool("build-only", false, "build the images, then stop")
	migrate := fs.Bool("migrate", false, "instead of the side-by-side cases: switch the official operator's objects to Tailplane in place, under load (docs/migration.md)")
	scale := fs.Bool("scale", false, "instead of the side-by-side cases: the scale part (issue 38 a), each operator alone with -scale-services and -scale-ingresses parents whose proxies stay Pending; API requests counted from the API server's audit log")
	fs.IntVar(&cfg.ScaleServices, "scale-services", 1000, "with -scale: LoadBalancer Services")
	fs.IntVar(&cfg.ScaleIngresses, "scale-ingresses", 300, "with -scale: Ingresses")
	back := fs.Bool("back", false, "with -migrate: then hand them back to the official operator, under the same load")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *cases != "" {
		cfg.Cases = strings.Split(*cases, ",")
		for _, c := range cfg.Cases {
			if !slices.Contains(official.AllCases(), c) {
				return fmt.Errorf("-cases: unknown part %q", c)
			}
		}
	}
	root, err := filepath.Abs(cfg.Root)
	if err != nil {
		return err
	}
	cfg.Root = root
	if cfg.Assets == "" {
		cfg.Assets = filepath.Join(root, ".cache", "assets")
	}
	if cfg.Work == "" {
		cfg.Work = filepath.Join(root, ".cache", "bench-official")
	}
	if *out == "" {
		*out = filepath.Join(cfg.Work, "report.md")
		switch {
		case *migrate:
			*out = filepath.Join(cfg.Work, "report-migrate.md")
		case *scale:
			*out = filepath.Join(cfg.Work, "report-scale.md")
		}
	}
	cfg.Audit = *scale
	if cfg.Runs < 1 {
		return fmt.Errorf("-runs %d: want at least 1", cfg.Runs)
	}
	if err := os.MkdirAll(cfg.Work, 0o755); err != nil {
		return err
	}
	if !*skipBuild {
		if err := official.Build(ctx, cfg, logger); err != nil {
			return err
		}
	}
	if *buildOnly {
		return nil
	}
	if *migrate {
		return runMigrate(ctx, cfg, *out, *back, logger)
	}
	env, err := official.Up(ctx, cfg, logger)
	defer env.Stop(logger)
	if err != nil {
		return err
	}
	// What was measured before a failure is printed too.
	if *scale {
		results, errs := official.Scale(ctx, env, logger)
		lines, notes := official.ScaleLines(cfg, results, errs)
		write := func(w io.Writer) error { return official.WriteScale(w, cfg, lines, notes) }
		return errors.Join(writeReport(write, *out, logger), errs[0], errs[1])
	}
	report, runErr := official.Run(ctx, env, logger)
	if err := report.Write(os.Stdout, cfg); err != nil {
		return err
	}
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := report.Write(f, cfg); err != nil {
		return err
	}
	logger.Info("report written", "file", *out)
	return runErr
}

// runMigrate is -migrate: the official operator alone, then Tailplane in
// its place, under load; the report goes to stdout and to out.
func runMigrate(ctx context.Context, cfg official.Config, out string, back bool, logger *log.Logger) error {
	env, err := official.UpMigrate(ctx, cfg, logger)
	defer env.Stop(logger)
	if err != nil {
		return err
	}
	report, runErr := official.RunMigrate(ctx, env, logger, back)
	if err := report.Write(os.Stdout); err != nil {
		return err
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := report.Write(f); err != nil {
		return err
	}
	logger.Info("report written", "file", out)
	return runErr
}

// writeReport writes a report to stdout and to the file out.
func writeReport(write func(io.Writer) error, out string, logger *log.Logger) error {
	if err := write(os.Stdout); err != nil {
		return err
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := write(f); err != nil {
		return err
	}
	logger.Info("report written", "file", out)
	return nil
}
