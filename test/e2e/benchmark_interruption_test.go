package e2e_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/karpenter-go/karpenter/pkg/apis/v1"
	"github.com/karpenter-go/karpenter/test/awslocal"
	"github.com/karpenter-go/karpenter/test/controlplane"
)

// BenchmarkAWSInterruption measures, on the controller binary and the local
// AWS, the time from spot interruption warnings landing on the queue to the
// interrupted NodeClaims being deleted (deletion timestamp set) and to their
// pods Running on replacements, for 1 and for 50 simultaneous interruptions
// (one pod per node, hostname anti-affinity). It runs only with -bench:
//
//	go test ./test/e2e -run '^$' -bench AWSInterruption -benchtime 1x -timeout 30m
func BenchmarkAWSInterruption(b *testing.B) {
	for _, n := range []int{1, 50} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
			defer cancel()
			e := newAWSEnv(b, ctx)
			cp := e.cp
			sqsAPI := sqs.NewFromConfig(e.local.Config(ctx))
			queue, err := sqsAPI.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(awsClusterName)})
			if err != nil {
				b.Fatal(err)
			}
			applyExamples(b, ctx, cp, "00-ec2nodeclass.yaml")
			spread := strings.NewReplacer("pool: general-purpose", "pool: spot", "replicas: 3", "replicas: "+strconv.Itoa(n)).Replace(awsSpread)
			for _, m := range []string{awsSpotPool, spread} {
				if err := controlplane.Apply(ctx, cp.Client, []byte(m)); err != nil {
					b.Fatal(err)
				}
			}
			e.startAWSController(b, "controller", "--interruption-queue="+awsClusterName)

			// The fleet before: n Ready NodeClaims, each with its pod.
			before := map[string]string{}
			if !waitFor(ctx, 10*time.Minute, func() bool {
				var claims v1.NodeClaimList
				if cp.Client.List(ctx, &claims) != nil || len(claims.Items) != n || runningOnOurNodes(ctx, b, cp, "app=spread") != n {
					return false
				}
				for _, nc := range claims.Items {
					_, id, ok := parseAWSProviderID(nc.Status.ProviderID)
					if !ok || !conditionTrue(nc.Status.Conditions, v1.ConditionTypeReady) {
						return false
					}
					before[nc.Name] = id
				}
				return true
			}) {
				b.Fatalf("%d spot nodes did not come up", n)
			}
			nodeOf := map[string]string{}
			var claims v1.NodeClaimList
			if err := cp.Client.List(ctx, &claims); err != nil {
				b.Fatal(err)
			}
			for _, nc := range claims.Items {
				nodeOf[nc.Status.NodeName] = nc.Name
			}

			b.ResetTimer()
			start := time.Now()
			var entries []sqstypes.SendMessageBatchRequestEntry
			flush := func() {
				if len(entries) == 0 {
					return
				}
				if _, err := sqsAPI.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: queue.QueueUrl, Entries: entries}); err != nil {
					b.Fatal(err)
				}
				entries = nil
			}
			i := 0
			for _, id := range before {
				body, err := e.local.InterruptionBody(ctx, awslocal.Interruption{QueueURL: aws.ToString(queue.QueueUrl), Kind: awslocal.InterruptionSpot, InstanceID: id})
				if err != nil {
					b.Fatal(err)
				}
				entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(body)})
				if i++; len(entries) == 10 {
					flush()
				}
			}
			flush()

			var deleted, running time.Duration
			for deleted == 0 || running == 0 {
				if ctx.Err() != nil {
					b.Fatalf("after %s: deleted %s, running %s", time.Since(start), deleted, running)
				}
				if deleted == 0 {
					var now v1.NodeClaimList
					if err := cp.Client.List(ctx, &now); err == nil {
						left := 0
						for _, nc := range now.Items {
							if _, old := before[nc.Name]; old && nc.DeletionTimestamp == nil {
								left++
							}
						}
						if left == 0 {
							deleted = time.Since(start)
						}
					}
				}
				if running == 0 {
					var pods corev1.PodList
					if err := cp.Client.List(ctx, &pods, client.MatchingLabels{"app": "spread"}); err == nil {
						moved := 0
						for _, p := range pods.Items {
							if _, old := nodeOf[p.Spec.NodeName]; p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && p.Spec.NodeName != "" && !old {
								moved++
							}
						}
						if moved == n {
							running = time.Since(start)
						}
					}
				}
				time.Sleep(100 * time.Millisecond)
			}
			b.StopTimer()
			b.ReportMetric(deleted.Seconds(), "s-to-deleted")
			b.ReportMetric(running.Seconds(), "s-to-running")
			b.Logf("%d interruptions: every NodeClaim deleted after %s, every pod Running on a replacement after %s", n, deleted.Round(10*time.Millisecond), running.Round(10*time.Millisecond))
		})
	}
}
