// Package settings holds the operator's settings as the handlers see them,
// read from environment variables with the official Tailscale operator's
// names (OPERATOR_NAMESPACE, PROXY_IMAGE, PROXY_TAGS, ...), so that the same
// Deployment env works for both.
//
// It imports only the standard library, tailscale.com/tailcfg (tag syntax)
// and tailscale.com/util/dnsname (hostname syntax).
package settings

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"

	"tailscale.com/tailcfg"
	"tailscale.com/util/dnsname"
)

// Environment variable names (the official operator's where it has one).
const (
	EnvNamespace        = "OPERATOR_NAMESPACE"
	EnvLoginServer      = "OPERATOR_LOGIN_SERVER"
	EnvClientIDFile     = "CLIENT_ID_FILE"
	EnvClientSecretFile = "CLIENT_SECRET_FILE"
	// EnvClientID, instead of the files, names a workload identity
	// federation client (the official chart sets it with oauth.audience).
	EnvClientID = "CLIENT_ID"
	// EnvServiceAccount is the operator's own ServiceAccount, whose
	// tokens a Tailnet's workload identity client exchanges (default
	// DefaultServiceAccount).
	EnvServiceAccount   = "OPERATOR_SERVICE_ACCOUNT"
	EnvProxyImage       = "PROXY_IMAGE"
	EnvProxyTags        = "PROXY_TAGS"
	EnvIngressClassName = "OPERATOR_INGRESS_CLASS_NAME"
	// EnvGatewayClassName is Tailplane's own: the GatewayClass the operator
	// creates at start when the Gateway API is installed and the class is
	// missing (the chart's gatewayAPI.gatewayClass). Empty: none.
	EnvGatewayClassName = "OPERATOR_GATEWAY_CLASS_NAME"
	// EnvLoadBalancerClass is Tailplane's own: the official operator
	// hard-codes the class tailscale.
	EnvLoadBalancerClass   = "OPERATOR_LOAD_BALANCER_CLASS"
	EnvDefaultProxyClass   = "PROXY_DEFAULT_CLASS"
	EnvDefaultLoadBalancer = "OPERATOR_DEFAULT_LOAD_BALANCER"
	EnvLogging             = "OPERATOR_LOGGING"
	EnvOperatorHostname    = "OPERATOR_HOSTNAME"
	EnvOperatorInitialTags = "OPERATOR_INITIAL_TAGS"
	EnvOperatorSecret      = "OPERATOR_SECRET"
	EnvOperatorPort        = "TS_PORT"
	// Tailplane's own: Headscale as the control server.
	EnvHeadscaleURL        = "HEADSCALE_URL"
	EnvHeadscaleAPIKeyFile = "HEADSCALE_API_KEY_FILE"
	EnvHeadscaleUser       = "HEADSCALE_USER"
	// Tailplane's own: the ACME directory every proxy requests its
	// certificates from, and the CA file it trusts (a staging or private
	// ACME server). The official operator has only per-ProxyClass TS_ env.
	EnvProxyACMEDirectoryURL = "PROXY_ACME_DIRECTORY_URL"
	EnvProxyACMECAFile       = "PROXY_ACME_CA_FILE"
	// EnvAdoptOfficial is Tailplane's own: what the operator does with a
	// proxy the official operator left for a parent it serves (AdoptOn,
	// AdoptDryRun or AdoptOff; default AdoptOn).
	EnvAdoptOfficial = "OPERATOR_ADOPT_OFFICIAL"
	// EnvHandBack is Tailplane's own: true makes the operator hand every
	// proxy back to the official operator (the reverse of adoption) and
	// handle nothing (docs/migration.md, "Going back").
	EnvHandBack = "OPERATOR_HAND_BACK"
)

// Values of EnvAdoptOfficial (docs/migration.md).
const (
	// AdoptOn takes the official proxy's device over: its state moves to
	// Tailplane's proxy, whose device keeps the node ID, addresses, name
	// and certificate; the official objects are deleted.
	AdoptOn = "on"
	// AdoptDryRun changes nothing: the parent waits, its official proxy
	// keeps serving, and its status and Events say what adoption would do.
	AdoptDryRun = "dry-run"
	// AdoptOff ignores official proxies: Tailplane's proxy gets a new
	// device beside the official one (for running both operators).
	AdoptOff = "off"
)

// Defaults.
const (
	DefaultProxyImage       = "ghcr.io/tailplane/tailplane-proxy:latest"
	DefaultProxyTags        = "tag:k8s"
	DefaultIngressClassName = "tailscale"
	// DefaultLoadBalancerClass is the official operator's (hard-coded there).
	DefaultLoadBalancerClass = "tailscale"
	DefaultClientIDFile      = "/oauth/client_id"
	DefaultClientSecretFile  = "/oauth/client_secret"
	// DefaultIDTokenFile is where the chart projects the operator's
	// ServiceAccount token for oauth.audience (the official path).
	DefaultIDTokenFile      = "/var/run/secrets/tailscale/serviceaccount/token"
	DefaultServiceAccount   = "operator"
	DefaultLogging          = "info"
	DefaultOperatorHostname = "tailscale-operator"
	DefaultOperatorTags     = "tag:k8s-operator"
	DefaultHeadscaleKeyFile = "/headscale/api_key"
	DefaultHeadscaleUser    = "tailplane"
	// namespaceFile is where Kubernetes mounts the Pod's namespace.
	namespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
)

// Settings configure the handlers.
type Settings struct {
	// Namespace is where every proxy object is created (OPERATOR_NAMESPACE,
	// else the operator Pod's own namespace).
	Namespace string
	// LoginServer is the control server URL (OPERATOR_LOGIN_SERVER), also
	// the API base URL; empty means Tailscale's.
	LoginServer string
	// ClientIDFile and ClientSecretFile hold the OAuth client credentials
	// (CLIENT_ID_FILE, CLIENT_SECRET_FILE).
	ClientIDFile, ClientSecretFile string
	// ClientID, when set (CLIENT_ID), is a workload identity federation
	// client used instead of the files: its API tokens are had for the
	// operator's ServiceAccount token projected at IDTokenFile
	// (DefaultIDTokenFile). No client secret is then on disk.
	ClientID, IDTokenFile string
	// ServiceAccount is the operator's own ServiceAccount in Namespace
	// (OPERATOR_SERVICE_ACCOUNT, default operator): a Tailnet whose
	// Secret has an audience asks the API server for its tokens.
	ServiceAccount string
	// HeadscaleURL, when set (HEADSCALE_URL), makes the control server a
	// Headscale one: the operator uses its REST API with the API key in
	// HeadscaleAPIKeyFile (HEADSCALE_API_KEY_FILE) instead of the OAuth
	// client, minting pre-auth keys owned by HeadscaleUser
	// (HEADSCALE_USER). LoginServer is then HeadscaleURL.
	HeadscaleURL, HeadscaleAPIKeyFile, HeadscaleUser string
	// ProxyImage is the tailplane-proxy image (PROXY_IMAGE).
	ProxyImage string
	// ProxyTags are the default proxy tags (PROXY_TAGS, comma-separated,
	// default tag:k8s).
	ProxyTags []string
	// IngressClassName is the IngressClass served
	// (OPERATOR_INGRESS_CLASS_NAME, default tailscale).
	IngressClassName string
	// GatewayClassName is the GatewayClass (of controller
	// tailplane.dev/gateway-controller) created at start when missing
	// (OPERATOR_GATEWAY_CLASS_NAME); empty: none is created.
	GatewayClassName string
	// LoadBalancerClass is the loadBalancerClass of the LoadBalancer
	// Services served (OPERATOR_LOAD_BALANCER_CLASS, default tailscale).
	// Another class lets Tailplane run beside the official operator, which
	// serves tailscale (bench/official).
	LoadBalancerClass string
	// DefaultProxyClass applies to Services, Ingresses and ProxyGroups that
	// name none (PROXY_DEFAULT_CLASS).
	DefaultProxyClass string
	// DefaultLoadBalancer makes the operator claim LoadBalancer Services
	// with no loadBalancerClass (OPERATOR_DEFAULT_LOAD_BALANCER).
	DefaultLoadBalancer bool
	// Logging is info, debug or dev (OPERATOR_LOGGING).
	Logging string
	// OperatorHostname is the tailnet hostname of the operator's own device
	// (OPERATOR_HOSTNAME, default tailscale-operator; a DNS label).
	OperatorHostname string
	// OperatorInitialTags are the tags of the auth key the operator mints for
	// its own device (OPERATOR_INITIAL_TAGS, comma-separated, default
	// tag:k8s-operator). They apply when the device is created only.
	OperatorInitialTags []string
	// OperatorSecret is the Secret in Namespace holding the operator
	// device's state (OPERATOR_SECRET). Empty keeps the state in a file that
	// is lost when the process restarts, as the official operator does.
	OperatorSecret string
	// OperatorPort is the UDP port of the operator device's WireGuard
	// (TS_PORT); 0 picks a free one.
	OperatorPort uint16
	// ProxyACME is what every proxy the operator creates uses for its
	// certificates (PROXY_ACME_DIRECTORY_URL, PROXY_ACME_CA_FILE); the zero
	// value leaves Let's Encrypt and the image's roots.
	ProxyACME ACME
	// AdoptOfficial is AdoptOn, AdoptDryRun or AdoptOff
	// (OPERATOR_ADOPT_OFFICIAL, default AdoptOn).
	AdoptOfficial string
	// HandBack (OPERATOR_HAND_BACK) makes the operator leave every proxy's
	// device in the official operator's layout and handle nothing.
	HandBack bool
}

// ACME points devices at an ACME server other than Let's Encrypt's.
type ACME struct {
	// DirectoryURL is the ACME directory (http or https URL); "" is Let's
	// Encrypt's.
	DirectoryURL string
	// CAFile is a PEM file, at that path inside the proxy's Pod, of the
	// CAs that sign the ACME server's certificate; "" trusts the image's
	// roots only.
	CAFile string
}

// FromEnv reads the settings through getenv (os.Getenv in production). Every
// problem is reported, one per line, naming the variable.
func FromEnv(getenv func(string) string) (Settings, error) {
	s := Settings{
		Namespace:         strings.TrimSpace(getenv(EnvNamespace)),
		LoginServer:       strings.TrimRight(strings.TrimSpace(getenv(EnvLoginServer)), "/"),
		ClientIDFile:      orDefault(getenv(EnvClientIDFile), DefaultClientIDFile),
		ClientSecretFile:  orDefault(getenv(EnvClientSecretFile), DefaultClientSecretFile),
		ClientID:          strings.TrimSpace(getenv(EnvClientID)),
		IDTokenFile:       DefaultIDTokenFile,
		ServiceAccount:    orDefault(getenv(EnvServiceAccount), DefaultServiceAccount),
		ProxyImage:        orDefault(getenv(EnvProxyImage), DefaultProxyImage),
		IngressClassName:  orDefault(getenv(EnvIngressClassName), DefaultIngressClassName),
		GatewayClassName:  strings.TrimSpace(getenv(EnvGatewayClassName)),
		LoadBalancerClass: orDefault(getenv(EnvLoadBalancerClass), DefaultLoadBalancerClass),
		DefaultProxyClass: strings.TrimSpace(getenv(EnvDefaultProxyClass)),
		Logging:           orDefault(getenv(EnvLogging), DefaultLogging),
		OperatorHostname:  orDefault(getenv(EnvOperatorHostname), DefaultOperatorHostname),
		OperatorSecret:    strings.TrimSpace(getenv(EnvOperatorSecret)),
		AdoptOfficial:     orDefault(getenv(EnvAdoptOfficial), AdoptOn),
	}
	var errs []error
	if err := s.readHeadscale(getenv); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, s.readACME(getenv)...)
	if s.Namespace == "" {
		if b, err := os.ReadFile(namespaceFile); err == nil {
			s.Namespace = strings.TrimSpace(string(b))
		}
		if s.Namespace == "" {
			errs = append(errs, fmt.Errorf("%s is not set and %s cannot be read", EnvNamespace, namespaceFile))
		}
	}
	tags, err := ParseTags(orDefault(getenv(EnvProxyTags), DefaultProxyTags))
	if err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", EnvProxyTags, err))
	}
	s.ProxyTags = tags
	if err := dnsname.ValidLabel(s.OperatorHostname); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w (it must be a DNS label: letters, digits and dashes, at most 63)", EnvOperatorHostname, err))
	}
	opTags, err := ParseTags(orDefault(getenv(EnvOperatorInitialTags), DefaultOperatorTags))
	if err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", EnvOperatorInitialTags, err))
	}
	s.OperatorInitialTags = opTags
	if v := strings.TrimSpace(getenv(EnvOperatorPort)); v != "" {
		port, err := strconv.ParseUint(v, 10, 16)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %q is not a UDP port number (0-65535)", EnvOperatorPort, v))
		}
		s.OperatorPort = uint16(port)
	}
	if v := strings.TrimSpace(getenv(EnvDefaultLoadBalancer)); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %q is not a boolean", EnvDefaultLoadBalancer, v))
		}
		s.DefaultLoadBalancer = b
	}
	if v := strings.TrimSpace(getenv(EnvHandBack)); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %q is not a boolean", EnvHandBack, v))
		}
		s.HandBack = b
	}
	switch s.AdoptOfficial {
	case AdoptOn, AdoptDryRun, AdoptOff:
	default:
		errs = append(errs, fmt.Errorf("%s: %q is not one of on, dry-run, off", EnvAdoptOfficial, s.AdoptOfficial))
	}
	switch s.Logging {
	case "info", "debug", "dev":
	default:
		errs = append(errs, fmt.Errorf("%s: %q is not one of info, debug, dev", EnvLogging, s.Logging))
	}
	return s, errors.Join(errs...)
}

// readHeadscale reads the Headscale settings; with a Headscale URL the login
// server is that URL, and OPERATOR_LOGIN_SERVER may only repeat it.
func (s *Settings) readHeadscale(getenv func(string) string) error {
	s.HeadscaleURL = strings.TrimRight(strings.TrimSpace(getenv(EnvHeadscaleURL)), "/")
	if s.HeadscaleURL == "" {
		return nil
	}
	s.HeadscaleAPIKeyFile = orDefault(getenv(EnvHeadscaleAPIKeyFile), DefaultHeadscaleKeyFile)
	s.HeadscaleUser = orDefault(getenv(EnvHeadscaleUser), DefaultHeadscaleUser)
	if s.LoginServer != "" && s.LoginServer != s.HeadscaleURL {
		return fmt.Errorf("%s (%s) and %s (%s) differ: with Headscale, proxies log in to %s; leave %s empty",
			EnvLoginServer, s.LoginServer, EnvHeadscaleURL, s.HeadscaleURL, EnvHeadscaleURL, EnvLoginServer)
	}
	s.LoginServer = s.HeadscaleURL
	return nil
}

// readACME reads the proxies' ACME settings: an absolute http(s) URL, and a
// file path as the proxy's Pod sees it (nothing the operator can open).
func (s *Settings) readACME(getenv func(string) string) []error {
	var errs []error
	s.ProxyACME = ACME{DirectoryURL: strings.TrimSpace(getenv(EnvProxyACMEDirectoryURL)), CAFile: strings.TrimSpace(getenv(EnvProxyACMECAFile))}
	if v := s.ProxyACME.DirectoryURL; v != "" {
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			errs = append(errs, fmt.Errorf("%s: %q is not an http(s) URL of an ACME directory (e.g. %s)", EnvProxyACMEDirectoryURL, v, letsEncryptStaging))
		}
	}
	if v := s.ProxyACME.CAFile; v != "" && !path.IsAbs(v) {
		errs = append(errs, fmt.Errorf("%s: %q is not an absolute path (the file as the proxy's Pod reads it)", EnvProxyACMECAFile, v))
	}
	return errs
}

// letsEncryptStaging is an example ACME directory for messages.
const letsEncryptStaging = "https://acme-staging-v02.api.letsencrypt.org/directory"

func orDefault(v, def string) string {
	if v = strings.TrimSpace(v); v != "" {
		return v
	}
	return def
}

// ParseTags splits a comma-separated tag list, trimming spaces and dropping
// empty entries, and checks each tag with tailcfg.CheckTag. The error names
// every invalid tag.
func ParseTags(list string) ([]string, error) {
	var tags []string
	var errs []error
	for tag := range strings.SplitSeq(list, ",") {
		tag = strings.TrimSpace(tag)
		if tag == "" {
			continue
		}
		if err := tailcfg.CheckTag(tag); err != nil {
			errs = append(errs, fmt.Errorf("invalid tag %q: %v", tag, err))
			continue
		}
		tags = append(tags, tag)
	}
	if len(errs) == 0 && len(tags) == 0 {
		errs = append(errs, errors.New("no tags given"))
	}
	return tags, errors.Join(errs...)
}

// SpecTags are the tags of a custom resource's devices: its spec.tags
// parsed, else defaults (the operator's proxy tags). Errors name spec.tags.
func SpecTags(tags, defaults []string) ([]string, error) {
	if len(tags) == 0 {
		return defaults, nil
	}
	out, err := ParseTags(strings.Join(tags, ","))
	if err != nil {
		return nil, fmt.Errorf("spec.tags: %w", err)
	}
	return out, nil
}
