"""An OpenFlow 1.3 learning switch for os-ken (what its former
simple_switch_13 did): a table-miss flow to the controller; on a
packet-in, learn the source MAC's port, install a flow for a known
destination and send the packet on (packet-out).

Run: python3 osken_learning_switch13.py --ofp-tcp-listen-port PORT
"""
import logging
import sys

from os_ken.lib import hub

hub.patch(thread=False)

from os_ken import cfg  # noqa: E402
from os_ken.base import app_manager  # noqa: E402
from os_ken.controller import ofp_event  # noqa: E402
from os_ken.controller.handler import (  # noqa: E402
    CONFIG_DISPATCHER, MAIN_DISPATCHER, set_ev_cls)
from os_ken.lib.packet import ether_types, ethernet, packet  # noqa: E402
from os_ken.ofproto import ofproto_v1_3  # noqa: E402


class LearningSwitch13(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.macs = {}

    def add_flow(self, dp, priority, match, actions):
        ofp, parser = dp.ofproto, dp.ofproto_parser
        inst = [parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions)]
        dp.send_msg(parser.OFPFlowMod(datapath=dp, priority=priority,
                                      match=match, instructions=inst))

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def switch_features(self, ev):
        dp = ev.msg.datapath
        ofp, parser = dp.ofproto, dp.ofproto_parser
        self.logger.info("switch %016x connected", dp.id)
        self.add_flow(dp, 0, parser.OFPMatch(),
                      [parser.OFPActionOutput(ofp.OFPP_CONTROLLER,
                                              ofp.OFPCML_NO_BUFFER)])

    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    def packet_in(self, ev):
        msg = ev.msg
        dp = msg.datapath
        ofp, parser = dp.ofproto, dp.ofproto_parser
        in_port = msg.match['in_port']
        eth = packet.Packet(msg.data).get_protocols(ethernet.ethernet)[0]
        if eth.ethertype == ether_types.ETH_TYPE_LLDP:
            return
        table = self.macs.setdefault(dp.id, {})
        table[eth.src] = in_port
        out = table.get(eth.dst, ofp.OFPP_FLOOD)
        self.logger.info("packet-in %s -> %s port %s: out %s",
                         eth.src, eth.dst, in_port, out)
        actions = [parser.OFPActionOutput(out)]
        if out != ofp.OFPP_FLOOD:
            self.add_flow(dp, 1, parser.OFPMatch(in_port=in_port,
                                                 eth_dst=eth.dst,
                                                 eth_src=eth.src), actions)
        data = msg.data if msg.buffer_id == ofp.OFP_NO_BUFFER else None
        dp.send_msg(parser.OFPPacketOut(datapath=dp, buffer_id=msg.buffer_id,
                                        in_port=in_port, actions=actions,
                                        data=data))


if __name__ == '__main__':
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    cfg.CONF(args=sys.argv[1:], project='os_ken')
    app_manager.AppManager.run_apps([__name__])
