// Command awslocal runs the local AWS (moto behind the awslocal front) on
// loopback until interrupted, for `make run` and for poking at it by hand.
// It prints the front's endpoint and the environment a controller needs to
// reach it, then waits; on SIGINT or SIGTERM it stops moto and exits.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/karpenter-go/karpenter/test/awslocal"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "awslocal:", err)
		os.Exit(1)
	}
}

func run() error {
	dir := flag.String("dir", "", "directory for moto's log; empty uses a temporary one")
	versions := flag.String("kubernetes-versions", strings.Join(awslocal.DefaultKubernetesVersions, ","), "Kubernetes minor versions to publish AMI parameters for")
	envFile := flag.String("env-file", "", "also write the AWS_* environment (KEY=VALUE lines) to this file")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	l, err := awslocal.Start(ctx, awslocal.Options{Dir: *dir, KubernetesVersions: strings.Split(*versions, ",")})
	if err != nil {
		return err
	}
	defer l.Stop()
	env := strings.Join(l.Env(), "\n") + "\n"
	if *envFile != "" {
		if err := os.WriteFile(*envFile, []byte(env), 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", *envFile, err)
		}
	}
	// The first line is what scripts read; the rest is for people.
	fmt.Printf("endpoint=%s\n%s", l.Endpoint(), env)
	<-ctx.Done()
	return nil
}
