// Package awslocal is the local AWS that the AWS provider's tests (and
// `make run`) talk to through the real aws-sdk-go-v2 clients. It starts
// moto (`moto_server`, the open-source AWS emulator) on a loopback port and
// puts a Go front in front of it. The SDK is pointed at the front
// (Local.Endpoint, as BaseEndpoint or AWS_ENDPOINT_URL); the front routes
// each request by the service in its SigV4 credential scope, forwards what
// moto serves well, and owns what moto lacks or gets wrong:
//
//   - AWS-shaped errors in place of moto's HTML 500s (which SDK v2 would
//     retry until it gives up), and injectable faults per action:
//     throttling, 5xx and latency (Local.AddFault);
//   - NextToken pagination of DescribeInstanceTypes,
//     DescribeInstanceTypeOfferings and DescribeImages, which moto answers
//     in one page whatever MaxResults says;
//   - the Pricing API (GetProducts) from the public on-demand price list and
//     DescribeSpotPriceHistory with deterministic, overridable prices;
//   - the public SSM parameters of the EKS-optimized AL2023 and AL2,
//     Bottlerocket and Windows AMIs, backed by images registered in moto,
//     and newer releases published on demand (Local.PublishImage).
//   - instant CreateFleet with allocation strategies over its own price and
//     capacity tables, per-override Errors, and launches in moto that keep
//     the launch template's attributes (Local.SetCapacity);
//   - DescribeCapacityReservations (Local.AddCapacityReservation) and
//     DescribeInstanceStatus with impairments and scheduled events
//     (Local.SetInstanceStatus, Local.AddInstanceEvent);
//   - EventBridge-shaped interruption events on an SQS queue (spot
//     interruption, rebalance, state change, scheduled change, reservation
//     interruption), optionally terminating the instance when its warning
//     is up (Local.SendInterruption);
//   - instance boot: running instances become the Nodes their kubelet would
//     register from their user data (Local.Boot);
//   - a real account's refusals: IAM principals whose calls are
//     authenticated and authorized against their identity policies
//     (Local.AddPrincipal, Evaluate), EC2's request throttling and eventual
//     consistency for them, and EC2's and IAM's quotas for every caller.
//
// Tests use the Go methods on *Local; other processes use the same controls
// over HTTP+JSON under /_awslocal/ on the front (see docs/awslocal.md).
package awslocal
