module github.com/ternwal/tern/bench/peers/rocksdb

go 1.26.0

require github.com/ternwal/tern v0.0.0

require (
	github.com/HdrHistogram/hdrhistogram-go v1.4.0 // indirect
	github.com/linxGnu/grocksdb v1.7.14
)

replace github.com/ternwal/tern => ../../..
