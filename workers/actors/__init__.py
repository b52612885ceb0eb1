"""The actors, a module per room: importing this package declares every one of them on the
configured broker (`workers.runtime.configure` first), and re-exports those other code names.

The work lives in the rooms; what they share (queue policies, the commit path, answering the
gateway) is in `shared`. A room reaches another's actor by name, never by import.
"""

from workers.actors import agents as agents
from workers.actors import app_webhooks as app_webhooks
from workers.actors import campaigns as campaigns
from workers.actors import dead_letters as dead_letters
from workers.actors import erasure as erasure
from workers.actors import event_streams as event_streams
from workers.actors import events as events
from workers.actors import idempotency as idempotency
from workers.actors import keys as keys
from workers.actors import outbound as outbound
from workers.actors import phone as phone
from workers.actors import records as records
from workers.actors import sessions as sessions
from workers.actors import takeover as takeover
from workers.actors import tools as tools
from workers.actors.events import deliver as deliver
from workers.actors.outbound import dial_committed as dial_committed
from workers.actors.sessions import TIMER_GRACE_MS as TIMER_GRACE_MS
from workers.actors.sessions import TIMER_LEASE_MS as TIMER_LEASE_MS
from workers.actors.sessions import attach_call as attach_call
from workers.actors.sessions import begin_admission as begin_admission
from workers.actors.sessions import create_session as create_session
from workers.actors.sessions import session_timer as session_timer
from workers.actors.takeover import session_owners as session_owners
from workers.actors.takeover import take_over as take_over
from workers.actors.takeover import take_over_session as take_over_session
