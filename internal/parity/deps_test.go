package parity

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLibraryDependsOnOTelAPIOnly checks that the library's packages use
// OpenTelemetry's API alone: no SDK, no exporter, no Prometheus client.
// An application chooses those; the example (examples/observability)
// brings its own.
func TestLibraryDependsOnOTelAPIOnly(t *testing.T) {
	pkgs := []string{"github.com/distlock/distlock", "github.com/distlock/distlock/etcdlock", "github.com/distlock/distlock/zklock",
		"github.com/distlock/distlock/fencing", "github.com/distlock/distlock/fencing/etcdfence",
		"github.com/distlock/distlock/fencing/zkfence", "github.com/distlock/distlock/fencing/sqlfence"}
	out, err := exec.Command("go", append([]string{"list", "-deps"}, pkgs...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"go.opentelemetry.io/otel/sdk", "go.opentelemetry.io/otel/exporters", "github.com/prometheus/"} {
			if strings.HasPrefix(dep, banned) {
				t.Errorf("the library imports %s", dep)
			}
		}
	}
	if !strings.Contains(string(out), "go.opentelemetry.io/otel/metric\n") {
		t.Error("the library does not import the OpenTelemetry metric API (test out of date?)")
	}
}

// TestRootWithoutCron checks that the root package, which every program
// using distlock imports, does not link in a cron parser: only package
// schedule needs one.
func TestRootWithoutCron(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/distlock/distlock").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "github.com/robfig/cron") {
		t.Error("the root package imports github.com/robfig/cron")
	}
}
