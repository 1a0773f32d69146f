package main

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"os"
)

// The TLS flags (etcd only), for clusters the harness started WithTLS:
// HolderSpec.TLS passes the cluster's files.
var (
	cacertFlag = flag.String("cacert", "", "etcd: CA certificate that signed the servers' certificates (PEM)")
	certFlag   = flag.String("cert", "", "etcd: client certificate (PEM)")
	keyFlag    = flag.String("key", "", "etcd: client key (PEM)")
)

// tlsFromFlags returns the client TLS configuration the flags ask for, or
// nil when they ask for none.
func tlsFromFlags() (*tls.Config, error) {
	if *cacertFlag == "" && *certFlag == "" {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if *cacertFlag != "" {
		pem, err := os.ReadFile(*cacertFlag)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("-cacert %s: no certificate in it", *cacertFlag)
		}
		tc.RootCAs = pool
	}
	if *certFlag != "" {
		kp, err := tls.LoadX509KeyPair(*certFlag, *keyFlag)
		if err != nil {
			return nil, err
		}
		tc.Certificates = []tls.Certificate{kp}
	}
	return tc, nil
}
