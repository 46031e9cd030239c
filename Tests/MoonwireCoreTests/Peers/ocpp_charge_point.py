"""A charge point on the `ocpp` library (mobilityhouse), OCPP 1.6 or 2.0.1: the real peer
of moonwire.ocpp's central system in examples/protocols/ocpp_test.lua and
examples/ocpp_mock.lua.

It connects to URL/ID offering the version's subprotocol, sends BootNotification,
Heartbeat and Authorize (id "bad" too), then calls two actions the central system is
expected not to handle (FirmwareStatusNotification, defined by both versions, and
"Bogus", defined by none), and reports what each of its calls gave in a DataTransfer
(vendor "report", data: a JSON object). It answers Reset (Accepted) and leaves every
other action to the library (a CALLERROR). It stays connected until the central system
closes the connection (or CLOSE_AFTER seconds pass).

usage: python ocpp_charge_point.py URL ID VERSION [CLOSE_AFTER]
"""
import asyncio
import dataclasses
import json
import logging
import sys

import websockets
from ocpp.routing import on
from ocpp.v16 import ChargePoint as Cp16, call as call16, call_result as result16
from ocpp.v201 import ChargePoint as Cp201, call as call201, call_result as result201

logging.basicConfig(level=logging.WARNING)


@dataclasses.dataclass
class Bogus:
    note: str = "an action no OCPP version defines"


async def outcome(cp, payload, **kw):
    try:
        result = await cp.call(payload, suppress=False, **kw)
        return {"result": dataclasses.asdict(result)}
    except Exception as e:
        return {"error": type(e).__name__, "code": getattr(e, "code", None),
                "description": getattr(e, "description", str(e))}


class ChargePoint16(Cp16):
    @on("Reset")
    def reset(self, type):
        return result16.Reset(status="Accepted" if type == "Hard" else "Rejected")

    async def script(self):
        report = {
            "BootNotification": await outcome(self, call16.BootNotification(
                charge_point_vendor="python-ocpp", charge_point_model="test")),
            "Heartbeat": await outcome(self, call16.Heartbeat()),
            "Authorize": await outcome(self, call16.Authorize(id_tag="good")),
            "AuthorizeBad": await outcome(self, call16.Authorize(id_tag="bad")),
            "FirmwareStatusNotification": await outcome(self, call16.FirmwareStatusNotification(status="Idle")),
            "Bogus": await outcome(self, Bogus(), skip_schema_validation=True),
        }
        await self.call(call16.DataTransfer(vendor_id="report", data=json.dumps(report)))


class ChargePoint201(Cp201):
    @on("Reset")
    def reset(self, type, **_):
        return result201.Reset(status="Accepted" if type == "Immediate" else "Rejected")

    async def script(self):
        report = {
            "BootNotification": await outcome(self, call201.BootNotification(
                charging_station={"vendorName": "python-ocpp", "model": "test"}, reason="PowerUp")),
            "Heartbeat": await outcome(self, call201.Heartbeat()),
            "Authorize": await outcome(self, call201.Authorize(id_token={"idToken": "good", "type": "Central"})),
            "AuthorizeBad": await outcome(self, call201.Authorize(id_token={"idToken": "bad", "type": "Central"})),
            "FirmwareStatusNotification": await outcome(self, call201.FirmwareStatusNotification(status="Idle")),
            "Bogus": await outcome(self, Bogus(), skip_schema_validation=True),
        }
        await self.call(call201.DataTransfer(vendor_id="report", data=json.dumps(report)))


async def main(url, cp_id, version, close_after):
    cls = ChargePoint16 if version == "1.6" else ChargePoint201
    async with websockets.connect(url.rstrip("/") + "/" + cp_id, subprotocols=["ocpp" + version]) as ws:
        cp = cls(cp_id, ws)
        runner = asyncio.ensure_future(cp.start())
        await cp.script()
        try:
            await asyncio.wait_for(runner, close_after)
        except (websockets.exceptions.ConnectionClosed, asyncio.TimeoutError):
            pass


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]) if len(sys.argv) > 4 else 30))
