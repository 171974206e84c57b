module github.com/ternwal/tern/bench/peers/nats

go 1.26.0

require (
	github.com/nats-io/nats.go v1.55.0
	github.com/ternwal/tern v0.0.0
)

require (
	github.com/HdrHistogram/hdrhistogram-go v1.4.0 // indirect
	github.com/klauspost/compress v1.20.0 // indirect
	github.com/nats-io/nkeys v0.4.16 // indirect
	github.com/nats-io/nuid v1.0.1 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
)

replace github.com/ternwal/tern => ../../..
