"""The 16 operational domains of the luck study's worlds (*Lessons from Luck*, section 3.1).

Each domain is a recurring operational task with a tool verb, a one-line tool
description (``{Name}`` is the coined part of a tool's name, capitalised), the text a
successful call returns, a pool of transient, non-diagnostic errors (the scripted
failure outcomes, section 3.2) and one true, irrelevant operational fact used as the
NEUTRAL memory item (section 3.3).  The texts are ours; the paper names the kinds of
task ("exporting data, sending invoices, rebuilding a search index and the like").
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Domain:
    key: str
    task: str
    verb: str
    description: str  # contains "{Name}"
    success: str
    errors: tuple[str, ...]
    fact_title: str
    fact_description: str
    fact_content: str

    def texts(self) -> str:
        """All of the domain's own text (for the coined-name check)."""
        return " ".join(
            [self.key, self.task, self.verb, self.description, self.success, *self.errors,
             self.fact_title, self.fact_description, self.fact_content]
        )


DOMAINS: tuple[Domain, ...] = (
    Domain(
        "export", "Export the nightly sales records to the reporting bucket.", "export",
        "exports the night's sales records to the reporting bucket through the {Name} route",
        "OK: sales records exported to the reporting bucket",
        ('ERROR 503: upstream temporarily unavailable', 'ERROR: connection reset by peer',
         'ERROR 504: gateway timeout', 'ERROR: request dropped during transfer'),
        "Reporting bucket retention",
        "Use when someone asks how long exported sales files stay in the reporting bucket.",
        "Exported sales files stay in the reporting bucket for 90 days and are then moved to cold storage.",
    ),
    Domain(
        "invoice", "Send this week's customer invoices by email.", "send",
        "sends the week's customer invoices by email through the {Name} mail relay",
        "OK: invoices handed to the mail relay",
        ('ERROR 421: service not available, closing transmission channel',
         'ERROR: relay connection timed out', 'ERROR 451: local error in processing',
         'ERROR: TLS handshake interrupted'),
        "Invoice numbering",
        "Use when someone asks how invoice numbers are formed.",
        "Invoice numbers start with the year followed by a five-digit counter that restarts every January.",
    ),
    Domain(
        "reindex", "Rebuild the product search index from the catalogue.", "reindex",
        "rebuilds the product search index from the catalogue on the {Name} cluster",
        "OK: search index rebuilt and swapped in",
        ('ERROR: cluster node not responding', 'ERROR 503: search service busy',
         'ERROR: bulk request timed out', 'ERROR: connection closed unexpectedly'),
        "Catalogue size",
        "Use when someone asks how large the product catalogue is.",
        "The product catalogue holds about forty thousand items, most of them in the home goods section.",
    ),
    Domain(
        "backup", "Back up the customer database to offsite storage.", "backup",
        "backs up the customer database to offsite storage through the {Name} agent",
        "OK: backup written and checksum verified",
        ('ERROR: storage endpoint temporarily unreachable', 'ERROR 500: internal error, try later',
         'ERROR: upload stream interrupted', 'ERROR: network timeout while writing'),
        "Backup window",
        "Use when someone asks when the backup window is.",
        "The backup window is between 01:00 and 04:00 local time, when customer traffic is lowest.",
    ),
    Domain(
        "build", "Build the release artefacts of the web application.", "build",
        "builds the web application's release artefacts on the {Name} build pool",
        "OK: release artefacts built and published",
        ('ERROR: build agent lost connection', 'ERROR: job evicted after node drain',
         'ERROR: worker timed out waiting for workspace', 'ERROR 502: bad gateway from build pool'),
        "Artefact naming",
        "Use when someone asks how release artefacts are named.",
        "Release artefacts are named after the application, the version and the build date.",
    ),
    Domain(
        "sync", "Synchronise the warehouse stock table with the central database.", "sync",
        "synchronises the warehouse stock table with the central database through the {Name} connector",
        "OK: stock table synchronised",
        ('ERROR: lock wait timeout exceeded', 'ERROR: connection to database lost',
         'ERROR: replica temporarily read-only', 'ERROR 503: connector busy'),
        "Stock table columns",
        "Use when someone asks what the stock table records.",
        "The stock table records each item's warehouse, shelf, quantity and the time of its last count.",
    ),
    Domain(
        "ship", "Book tomorrow's parcel pickups with the carrier.", "ship",
        "books the next day's parcel pickups with the carrier through the {Name} gateway",
        "OK: pickups booked and confirmed",
        ('ERROR: no confirmation received from carrier', 'ERROR 503: carrier service unavailable',
         'ERROR: gateway timeout', 'ERROR: session expired during booking'),
        "Pickup hours",
        "Use when someone asks when parcels are picked up.",
        "The carrier picks up parcels between 14:00 and 17:00 on working days.",
    ),
    Domain(
        "notify", "Send the morning status digest to the on-call team.", "notify",
        "sends the morning status digest to the on-call team through the {Name} notifier",
        "OK: digest delivered to the on-call team",
        ('ERROR 429: too many requests, slow down', 'ERROR: notifier connection refused',
         'ERROR 503: messaging backend unavailable', 'ERROR: delivery timed out'),
        "Digest contents",
        "Use when someone asks what the status digest contains.",
        "The status digest lists open incidents, yesterday's deployments and the day's maintenance windows.",
    ),
    Domain(
        "payout", "Pay out the approved supplier payments for the day.", "pay",
        "pays out the day's approved supplier payments through the {Name} payment rail",
        "OK: payments submitted and acknowledged",
        ('ERROR: payment gateway timeout', 'ERROR 503: rail temporarily unavailable',
         'ERROR: acknowledgement not received', 'ERROR: connection reset during submission'),
        "Approval threshold",
        "Use when someone asks which supplier payments need a second approval.",
        "Supplier payments above ten thousand need a second approval before they are queued.",
    ),
    Domain(
        "certs", "Renew the TLS certificates that expire this month.", "renew",
        "renews the month's expiring TLS certificates through the {Name} issuer",
        "OK: certificates renewed and installed",
        ('ERROR: issuer did not respond in time', 'ERROR 503: issuance queue busy',
         'ERROR: validation request timed out', 'ERROR: connection dropped by issuer'),
        "Certificate lifetime",
        "Use when someone asks how long the certificates are valid.",
        "The certificates are issued for ninety days and are renewed during the month they expire.",
    ),
    Domain(
        "archive", "Archive yesterday's application logs.", "archive",
        "compresses and archives the previous day's application logs through the {Name} archiver",
        "OK: logs compressed and archived",
        ('ERROR: archive store temporarily unavailable', 'ERROR: write timed out',
         'ERROR 500: internal error in archive service', 'ERROR: stream closed before completion'),
        "Log volume",
        "Use when someone asks how much log data a day produces.",
        "A normal day produces about twelve gigabytes of application logs before compression.",
    ),
    Domain(
        "report", "Refresh the finance dashboard with the latest figures.", "refresh",
        "refreshes the finance dashboard with the latest figures through the {Name} renderer",
        "OK: dashboard refreshed",
        ('ERROR: renderer worker crashed, job abandoned', 'ERROR 504: query gateway timeout',
         'ERROR: data source temporarily unavailable', 'ERROR: render request dropped'),
        "Dashboard audience",
        "Use when someone asks who reads the finance dashboard.",
        "The finance dashboard is read mainly by the controllers in the monthly closing meeting.",
    ),
    Domain(
        "cache", "Warm the content cache before the morning traffic.", "warm",
        "warms the content cache before the morning traffic through the {Name} prefetcher",
        "OK: cache warmed",
        ('ERROR: origin temporarily unreachable', 'ERROR 503: edge node busy',
         'ERROR: prefetch request timed out', 'ERROR: connection reset by edge'),
        "Cache lifetime",
        "Use when someone asks how long cached pages are kept.",
        "Cached pages are kept for six hours unless an editor publishes a change.",
    ),
    Domain(
        "import", "Import the vendor price feed into the pricing database.", "import",
        "imports the vendor price feed into the pricing database through the {Name} loader",
        "OK: price feed imported",
        ('ERROR: feed download interrupted', 'ERROR 503: loader temporarily unavailable',
         'ERROR: database connection timed out', 'ERROR: transfer aborted by remote host'),
        "Feed schedule",
        "Use when someone asks when the vendor publishes its feed.",
        "The vendor publishes its price feed every night shortly after midnight.",
    ),
    Domain(
        "rollup", "Roll up yesterday's service metrics into daily summaries.", "rollup",
        "rolls up the previous day's service metrics into daily summaries on the {Name} engine",
        "OK: daily summaries written",
        ('ERROR: executor lost during job', 'ERROR: query timed out',
         'ERROR 503: engine temporarily overloaded', 'ERROR: shuffle fetch failed'),
        "Metric retention",
        "Use when someone asks how long raw metrics are kept.",
        "Raw metrics are kept for fourteen days; daily summaries are kept for two years.",
    ),
    Domain(
        "scan", "Scan the container images for known vulnerabilities.", "scan",
        "scans the container images for known vulnerabilities through the {Name} scanner",
        "OK: scan finished and report stored",
        ('ERROR: scanner database update timed out', 'ERROR 502: bad gateway',
         'ERROR: registry connection reset', 'ERROR: scan worker restarted, job lost'),
        "Image count",
        "Use when someone asks how many container images are scanned.",
        "About three hundred container images are in use, most of them built from two base images.",
    ),
)

DOMAIN_BY_KEY = {d.key: d for d in DOMAINS}
