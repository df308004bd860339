package imagebuild_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tailplane/tailplane/deploy/images/internal/imagebuild"
)

func TestParsePlatforms(t *testing.T) {
	ps, err := imagebuild.ParsePlatforms("linux/amd64, linux/arm64")
	if err != nil || len(ps) != 2 || ps[0].String() != "linux/amd64" || ps[1].String() != "linux/arm64/v8" {
		t.Fatalf("got %v, %v; want linux/amd64 and linux/arm64/v8", ps, err)
	}
	for in, want := range map[string]string{
		"":              "no platform given",
		"windows/amd64": `platform "windows/amd64": want linux/<arch>`,
		"linux":         `platform "linux": want linux/<arch>`,
	} {
		if _, err := imagebuild.ParsePlatforms(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", in, err, want)
		}
	}
}

func TestSourceDateFrom(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "SOURCE_DATE_EPOCH" {
				return v
			}
			return ""
		}
	}
	got, err := imagebuild.SourceDateFrom(context.Background(), t.TempDir(), env("1700000000"))
	if err != nil || !got.Equal(time.Unix(1700000000, 0)) {
		t.Fatalf("SOURCE_DATE_EPOCH=1700000000: %v, %v", got, err)
	}
	if _, err := imagebuild.SourceDateFrom(context.Background(), t.TempDir(), env("yesterday")); err == nil || !strings.Contains(err.Error(), `SOURCE_DATE_EPOCH: "yesterday" is not a number of seconds`) {
		t.Errorf("bad SOURCE_DATE_EPOCH: %v", err)
	}
	// Outside a git checkout and without SOURCE_DATE_EPOCH there is no date.
	if _, err := imagebuild.SourceDateFrom(context.Background(), t.TempDir(), env("")); err == nil || !strings.Contains(err.Error(), "set SOURCE_DATE_EPOCH outside a git checkout") {
		t.Errorf("no git, no SOURCE_DATE_EPOCH: %v", err)
	}
	// In this checkout: the commit time of HEAD.
	if got, err := imagebuild.SourceDateFrom(context.Background(), ".", env("")); err != nil || got.Year() < 2020 {
		t.Errorf("commit time: %v, %v", got, err)
	}
}
