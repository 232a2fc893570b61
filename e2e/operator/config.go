package operator

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Config is what the operator reads from its environment: the chart's operator ConfigMap.
type Config struct {
	Namespace       string // POLYAXON_K8S_NAMESPACE
	SingleNamespace bool   // watch Namespace only, else every namespace
	SetAgent        bool   // report statuses to the API
	APIHost         string
	APIPort         int
	AuthToken       string // sent as "Authorization: Token ..." when set
	InternalToken   string // authenticates the logs collection
	// CollectLogs (POLYAXON_ENABLE_LOGS_FINALIZERS): archive a finished run's logs through
	// streams when its resource asks for it (collectLogs).
	CollectLogs bool
	LogLevel    slog.Level
	// Enabled holds the backend switches that are "true", by environment key.
	Enabled map[string]bool
}

// Environment keys (mloperator controllers/config/config.go, plugins/polyaxon.go).
const (
	envNamespace       = "POLYAXON_K8S_NAMESPACE"
	envSingleNamespace = "POLYAXON_SINGLE_NAMESPACE"
	envSetAgent        = "POLYAXON_SET_AGENT"
	envAPIHost         = "POLYAXON_PROXY_API_HOST"
	envAPIPort         = "POLYAXON_PROXY_API_PORT"
	envAuthToken       = "POLYAXON_AUTH_TOKEN"
	envInternalToken   = "POLYAXON_SECRET_INTERNAL_TOKEN"
	envCollectLogs     = "POLYAXON_ENABLE_LOGS_FINALIZERS"
	envLogLevel        = "POLYAXON_LOG_LEVEL"
	// The pre-2.12 name of the Ray switch: read by nothing since (charts ebc74a6).
	envRayJobEnabled = "POLYAXON_RAY_JOB_ENABLED"
)

// ConfigFromEnv reads the configuration through lookup (os.LookupEnv). Every bad setting is
// in the error; warnings name settings that are read by nothing.
func ConfigFromEnv(lookup func(string) (string, bool)) (Config, []string, error) {
	var errs []error
	var warnings []string
	get := func(k string) string { v, _ := lookup(k); return strings.TrimSpace(v) }
	flag := func(k string) bool {
		v := get(k)
		if v == "" {
			return false
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: want true or false", k, v))
		}
		return b
	}

	c := Config{
		Namespace:       get(envNamespace),
		SingleNamespace: flag(envSingleNamespace),
		SetAgent:        flag(envSetAgent),
		APIHost:         get(envAPIHost),
		AuthToken:       get(envAuthToken),
		InternalToken:   get(envInternalToken),
		CollectLogs:     flag(envCollectLogs),
		Enabled:         map[string]bool{},
	}
	for _, b := range backends {
		if b.Switch != "" && flag(b.Switch) {
			c.Enabled[b.Switch] = true
		}
	}
	if c.SingleNamespace && c.Namespace == "" {
		errs = append(errs, fmt.Errorf("%s=true needs %s (the namespace to watch)", envSingleNamespace, envNamespace))
	}
	if port := get(envAPIPort); port != "" {
		p, err := strconv.Atoi(port)
		if err != nil || p < 1 || p > 65535 {
			errs = append(errs, fmt.Errorf("%s=%q: want a port number", envAPIPort, port))
		}
		c.APIPort = p
	}
	if c.SetAgent {
		// Without them every status would go to mloperator's default, localhost:8000.
		if c.APIHost == "" {
			errs = append(errs, fmt.Errorf("%s=true needs %s (where Polyaxon's API is)", envSetAgent, envAPIHost))
		}
		if get(envAPIPort) == "" {
			errs = append(errs, fmt.Errorf("%s=true needs %s", envSetAgent, envAPIPort))
		}
	}
	level, err := parseLogLevel(get(envLogLevel))
	if err != nil {
		errs = append(errs, err)
	}
	c.LogLevel = level
	if v := get(envRayJobEnabled); v != "" {
		warnings = append(warnings, fmt.Sprintf("%s=%s is read by nothing since Polyaxon 2.12: Ray clusters follow %s", envRayJobEnabled, v, rayCluster.Switch))
	}
	return c, warnings, errors.Join(errs...)
}

// Polyaxon's levels (the chart's logLevel): DEBUG, INFO, WARNING, ERROR, CRITICAL.
func parseLogLevel(v string) (slog.Level, error) {
	switch strings.ToUpper(v) {
	case "DEBUG":
		return slog.LevelDebug, nil
	case "", "INFO":
		return slog.LevelInfo, nil
	case "WARNING", "WARN":
		return slog.LevelWarn, nil
	case "ERROR", "CRITICAL":
		return slog.LevelError, nil
	}
	return slog.LevelInfo, fmt.Errorf("%s=%q: want DEBUG, INFO, WARNING, ERROR or CRITICAL", envLogLevel, v)
}

// WatchNamespace is the namespace the informers list: one, or all.
func (c Config) WatchNamespace() string {
	if c.SingleNamespace {
		return c.Namespace
	}
	return metav1.NamespaceAll
}

// APIURL is the base URL of Polyaxon's API: https only on port 443, as the operator does.
func (c Config) APIURL() string {
	scheme := "http"
	if c.APIPort == 443 {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(c.APIHost, strconv.Itoa(c.APIPort))
}

// enabled says whether the operator may create children of backend b.
func (c Config) enabled(b Backend) bool {
	return b.Switch == "" || c.Enabled[b.Switch]
}
