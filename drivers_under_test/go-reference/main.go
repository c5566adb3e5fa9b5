// Command go-reference is a CCI CPU driver written from docs/spec.md alone, the Go counterpart of the
// Python reference driver: it proves the driver contract of cci-conformance is language-neutral.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	cci "github.com/cci-conformance/cci-conformance/api/cci/v1alpha1"
	"google.golang.org/grpc"
	registration "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

func listen(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	// A socket left by a killed predecessor would make bind fail.
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	return net.Listen("unix", path)
}

func run() error {
	registryDir := flag.String("registry-dir", "", "the kubelet's plugins_registry directory")
	pluginDir := flag.String("plugin-dir", "", "directory of the CCI socket (<kubelet-root>/plugins/<name>)")
	sysRoot := flag.String("sysfs-root", "/sys", "directory standing for /sys")
	stateDir := flag.String("state-dir", "", "directory of the driver's state file")
	name := flag.String("name", "go-reference", "driver name")
	flag.Parse()
	for flagName, v := range map[string]string{"registry-dir": *registryDir, "plugin-dir": *pluginDir,
		"state-dir": *stateDir} {
		if v == "" {
			return fmt.Errorf("--%s is required", flagName)
		}
	}
	topo, err := ReadTopology(*sysRoot)
	if err != nil {
		return fmt.Errorf("reading the topology under %s: %v", *sysRoot, err)
	}
	store, err := OpenStore(*stateDir)
	if err != nil {
		return err
	}
	cciSock, err := filepath.Abs(filepath.Join(*pluginDir, "cci.sock"))
	if err != nil {
		return err
	}
	regSock := filepath.Join(*registryDir, *name+"-reg.sock")

	// The CCI socket answers before the registration socket appears (S1.2).
	cciLis, err := listen(cciSock)
	if err != nil {
		return fmt.Errorf("CCI socket %s: %v", cciSock, err)
	}
	cciServer := grpc.NewServer()
	cci.RegisterCCIDriverServer(cciServer, &Driver{topo: topo, sysRoot: *sysRoot, store: store})
	go func() { _ = cciServer.Serve(cciLis) }()
	regLis, err := listen(regSock)
	if err != nil {
		return fmt.Errorf("registration socket %s: %v", regSock, err)
	}
	regServer := grpc.NewServer()
	registration.RegisterRegistrationServer(regServer, &Registrar{name: *name, endpoint: cciSock})
	go func() { _ = regServer.Serve(regLis) }()
	log.Printf("%s serving %s (%d admissions restored, %d CPUs, %d NUMA nodes with CPUs)", *name, cciSock,
		len(store.byKey), topo.Online.Len(), len(topo.Nodes))

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	// S1.9: on SIGTERM stop serving, remove both sockets, exit 0. A call in flight gets a short grace.
	for _, s := range []*grpc.Server{regServer, cciServer} {
		done := make(chan struct{})
		go func() { s.GracefulStop(); close(done) }()
		select {
		case <-done:
		case <-time.After(2 * time.Second):
			s.Stop()
		}
	}
	for _, p := range []string{regSock, cciSock} {
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			log.Printf("removing %s: %v", p, err)
		}
	}
	return nil
}

func main() {
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	log.SetPrefix("go-reference: ")
	if err := run(); err != nil {
		log.Printf("cannot start: %v", err)
		os.Exit(1)
	}
}
