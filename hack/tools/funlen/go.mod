// Tools module: the function-length rule of `make lint` (github.com/ultraware/funlen,
// the analyzer golangci-lint runs as funlen), with the project's exceptions.
module github.com/replicafed/replicafed/hack/tools/funlen

go 1.26.0

require (
	github.com/ultraware/funlen v0.2.0
	golang.org/x/tools v0.28.0
)

require (
	golang.org/x/mod v0.22.0 // indirect
	golang.org/x/sync v0.10.0 // indirect
)
