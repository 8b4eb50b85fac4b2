// Package aws is the root of the AWS cloud provider: its subpackages turn
// EC2 API data and an EC2NodeClass into what the core controllers consume
// (instance types today; launches, offerings and drift as they are added).
package aws
