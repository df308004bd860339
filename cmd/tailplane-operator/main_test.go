package main

import (
	"os"
	"testing"

	"github.com/tailplane/tailplane/internal/testenv"
)

// env is a real kube-apiserver for the package's tests.
var env = testenv.New()

func TestMain(m *testing.M) { os.Exit(env.Run(m)) }
