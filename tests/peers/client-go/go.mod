// Read only in GOPATH mode (GO111MODULE=off), where a go.mod beside the code
// lets imports such as k8s.io/klog/v2 resolve to the Debian packages' trees
// (minimal module compatibility). No requirement is listed: nothing is fetched.
module kreflect/client-go-peer

go 1.24
