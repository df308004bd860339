// Command template prints the chart of deploy/chart rendered with the values
// given, as `helm template` does, with no helm install needed:
//
//	go run ./deploy/chart/template --set-string oauth.clientId=x --set-string oauth.clientSecret=y --set monitoring.podMonitor.enabled=true
//
// kind-e2e's observability spec renders the chart's monitoring objects with
// it. It imports deploy/chart, helm's strvals and charmbracelet/log.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/charmbracelet/log"
	"helm.sh/helm/v3/pkg/strvals"

	"github.com/tailplane/tailplane/deploy/chart"
)

// setFlags collects repeated --set or --set-string values.
type setFlags []string

func (s *setFlags) String() string     { return strings.Join(*s, ",") }
func (s *setFlags) Set(v string) error { *s = append(*s, v); return nil }

func main() {
	var set, setString setFlags
	flag.Var(&set, "set", "a value, as helm's --set (repeatable)")
	flag.Var(&setString, "set-string", "a string value, as helm's --set-string (repeatable)")
	namespace := flag.String("namespace", chart.Namespace, "the release's namespace")
	flag.Parse()
	logger := log.NewWithOptions(os.Stderr, log.Options{Prefix: "chart:template"})
	vals := map[string]any{}
	for _, s := range set {
		if err := strvals.ParseInto(s, vals); err != nil {
			logger.Error("--set", "value", s, "err", err)
			os.Exit(2)
		}
	}
	for _, s := range setString {
		if err := strvals.ParseIntoString(s, vals); err != nil {
			logger.Error("--set-string", "value", s, "err", err)
			os.Exit(2)
		}
	}
	rel, err := chart.Render(context.Background(), *namespace, vals)
	if err != nil {
		logger.Error(err.Error())
		os.Exit(1)
	}
	fmt.Print(rel.Manifest)
}
