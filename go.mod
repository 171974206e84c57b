module github.com/ternwal/tern

go 1.26

require (
	go.etcd.io/bbolt v1.5.0
	golang.org/x/sys v0.45.0 // indirect
)
