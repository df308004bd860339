module github.com/tailplane/tailplane/plugins/sdk

go 1.24
