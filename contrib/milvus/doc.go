// Package milvus is a Milvus 2.6 WAL backend named "tern": it implements
// the interfaces of github.com/milvus-io/milvus/pkg/v2/streaming/walimpls
// over Tern. It is a module of its own, so that Tern's main module does not
// depend on Milvus.
package milvus
