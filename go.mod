module github.com/ternwal/tern

go 1.26
