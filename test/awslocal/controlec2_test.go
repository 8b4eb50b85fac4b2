package awslocal_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/stretchr/testify/require"

	"github.com/karpenter-go/karpenter/test/awslocal"
)

func control(t *testing.T, method, path string, in, out any) int {
	t.Helper()
	var body bytes.Buffer
	if in != nil {
		require.NoError(t, json.NewEncoder(&body).Encode(in))
	}
	req, err := http.NewRequest(method, local.Endpoint()+"/_awslocal/"+path, &body)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	if out != nil {
		require.NoError(t, json.NewDecoder(resp.Body).Decode(out))
	}
	return resp.StatusCode
}

func TestControlAPICapacityReservationsAndStatus(t *testing.T) {
	t.Cleanup(func() { local.ClearCapacity(); local.ClearInstanceStatus("") })
	require.Equal(t, http.StatusOK, control(t, http.MethodPut, "capacity", map[string]any{"instanceType": "c5.large", "zone": "us-east-1b", "capacityType": "spot", "count": 0}, nil))
	n, limited := local.Capacity("c5.large", "us-east-1b", awslocal.CapacityTypeSpot)
	require.True(t, limited)
	require.Zero(t, n)
	var caps []map[string]any
	require.Equal(t, http.StatusOK, control(t, http.MethodGet, "capacity", nil, &caps))
	require.NotEmpty(t, caps)
	require.Equal(t, http.StatusBadRequest, control(t, http.MethodPut, "capacity", map[string]any{"instanceType": "c5.large", "zone": "us-east-1b", "capacityType": "reserved"}, nil))
	require.Equal(t, http.StatusOK, control(t, http.MethodDelete, "capacity", nil, nil))
	_, limited = local.Capacity("c5.large", "us-east-1b", awslocal.CapacityTypeSpot)
	require.False(t, limited)

	var cr awslocal.CapacityReservation
	require.Equal(t, http.StatusCreated, control(t, http.MethodPost, "capacity-reservations",
		map[string]any{"instanceType": "p5.48xlarge", "availabilityZone": "us-east-1a", "totalInstanceCount": 4, "reservationType": "capacity-block"}, &cr))
	t.Cleanup(func() { local.RemoveCapacityReservation(cr.ID) })
	require.NotEmpty(t, cr.ID)
	require.Equal(t, 4, cr.AvailableInstanceCount)
	require.NotNil(t, cr.EndDate, "a capacity block ends")
	require.Equal(t, http.StatusOK, control(t, http.MethodPut, "capacity-reservations/state", map[string]any{"id": cr.ID, "state": "cancelled"}, &cr))
	require.Equal(t, "cancelled", cr.State)
	out, err := ec2Client(t).DescribeCapacityReservations(context.Background(), &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: []string{cr.ID}})
	require.NoError(t, err)
	require.Equal(t, ec2types.CapacityReservationStateCancelled, out.CapacityReservations[0].State)
	var removed map[string]bool
	require.Equal(t, http.StatusOK, control(t, http.MethodDelete, "capacity-reservations?id="+cr.ID, nil, &removed))
	require.True(t, removed["removed"])

	require.Equal(t, http.StatusOK, control(t, http.MethodPut, "instance-status", map[string]any{"instanceId": "i-0abc", "instanceStatus": "impaired"}, nil))
	require.Equal(t, http.StatusCreated, control(t, http.MethodPost, "instance-events", map[string]any{"instanceId": "i-0abc", "code": "system-reboot"}, nil))
	require.Equal(t, http.StatusBadRequest, control(t, http.MethodPost, "instance-events", map[string]any{"instanceId": "i-0abc", "code": "explode"}, nil))
	require.Equal(t, http.StatusOK, control(t, http.MethodDelete, "instance-status?instanceId=i-0abc", nil, nil))
	require.Equal(t, http.StatusNotFound, control(t, http.MethodGet, "nothing-here", nil, nil))
}
