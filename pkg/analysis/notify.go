package analysis

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"

	appv1 "github.com/app-controller/app-controller/pkg/apis/appcontroller/v1"
)

// NotificationFormat is the body a notification is POSTed with.
type NotificationFormat string

const (
	// FormatJSON posts a Notification as JSON.
	FormatJSON NotificationFormat = "json"
	// FormatSlack posts {"text": "..."}: what Slack's incoming webhooks (and Mattermost,
	// Rocket.Chat, Discord's /slack endpoint) take.
	FormatSlack NotificationFormat = "slack"
)

// Notification is a rollout event sent to the notification webhook.
type Notification struct {
	// Event: started, step, paused, aborted or promoted.
	Event     string    `json:"event"`
	Namespace string    `json:"namespace"`
	App       string    `json:"app"`
	Reason    string    `json:"reason"`
	Message   string    `json:"message"`
	Time      time.Time `json:"time"`
}

// EventOf returns the notification event of an App Event's reason, "" for one that is
// not notified.
func EventOf(reason string) string {
	switch reason {
	case appv1.EventReasonRolloutStarted:
		return "started"
	case appv1.EventReasonRolloutStep:
		return "step"
	case appv1.EventReasonRolloutPaused:
		return "paused"
	case appv1.ReasonRolloutAborted:
		return "aborted"
	case appv1.EventReasonRolloutPromoted:
		return "promoted"
	}
	return ""
}

// notifyQueue bounds the notifications waiting to be sent: beyond it they are dropped
// (and counted), never waited for.
const notifyQueue = 256

// NotifyTimeout bounds one notification's call.
const NotifyTimeout = 5 * time.Second

// Notifier sends rollout notifications to a webhook, one POST each, from its own
// goroutine: Notify never blocks a sync, and a notification that fails is logged and
// dropped (a rollout never waits for one).
type Notifier struct {
	url    string
	format NotificationFormat
	client *http.Client
	queue  chan Notification
	// Sent, Failed and Dropped count the notifications.
	Sent, Failed, Dropped atomic.Int64
}

// NewNotifier returns a Notifier to url in format; Run sends.
func NewNotifier(url string, format NotificationFormat, client *http.Client) (*Notifier, error) {
	switch format {
	case FormatJSON, FormatSlack:
	case "":
		format = FormatJSON
	default:
		return nil, fmt.Errorf("notification format %q: want json or slack", format)
	}
	if client == nil {
		client = &http.Client{}
	}
	return &Notifier{url: url, format: format, client: client, queue: make(chan Notification, notifyQueue)}, nil
}

// Notify queues n; when the queue is full, n is dropped.
func (n *Notifier) Notify(nt Notification) {
	if n == nil {
		return
	}
	select {
	case n.queue <- nt:
	default:
		n.Dropped.Add(1)
	}
}

// DrainTimeout bounds how long Run goes on sending what is queued once its context is
// done: the notifications of the last syncs before a stop are sent, not dropped, unless
// the webhook is too slow for them.
const DrainTimeout = NotifyTimeout

// Run sends the queued notifications until ctx is done, and then what is still queued,
// within DrainTimeout. The App controller runs it until its workers have stopped, so
// that a transition written by a sync in flight at a stop is notified.
func (n *Notifier) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			n.drain(ctx, nil)
			return
		case nt := <-n.queue:
			if ctx.Err() != nil {
				// Both were ready and the queue was picked.
				n.drain(ctx, &nt)
				return
			}
			n.deliver(ctx, nt)
		}
	}
}

// drain sends first (when there is one) and what is queued, within DrainTimeout of
// ctx's end.
func (n *Notifier) drain(ctx context.Context, first *Notification) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DrainTimeout)
	defer cancel()
	if first != nil {
		n.deliver(ctx, *first)
	}
	for {
		select {
		case nt := <-n.queue:
			n.deliver(ctx, nt)
		default:
			return
		}
	}
}

// deliver sends nt and counts it as sent or failed.
func (n *Notifier) deliver(ctx context.Context, nt Notification) {
	if err := n.send(ctx, nt); err != nil {
		n.Failed.Add(1)
		klog.FromContext(ctx).Info("Rollout notification not sent", "app", klog.KRef(nt.Namespace, nt.App), "event", nt.Event, "err", err)
		return
	}
	n.Sent.Add(1)
}

// Body returns the body nt is POSTed with in format.
func Body(nt Notification, format NotificationFormat) ([]byte, error) {
	if format == FormatSlack {
		return json.Marshal(map[string]string{"text": fmt.Sprintf("%s/%s: rollout %s: %s", nt.Namespace, nt.App, nt.Event, nt.Message)})
	}
	return json.Marshal(nt)
}

func (n *Notifier) send(ctx context.Context, nt Notification) error {
	body, err := Body(nt, n.format)
	if err != nil {
		return fmt.Errorf("encoding the notification: %w", err)
	}
	code, err := post(ctx, n.client, n.url, body, NotifyTimeout)
	if err != nil {
		return err
	}
	if code < 200 || code >= 300 {
		return fmt.Errorf("the notification webhook answered %d", code)
	}
	return nil
}
