#include "engine.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace tether::sim {

Engine::Engine(const Params& params)
    : p_(params),
      n_(params.hosts * params.ranksPerHost),
      ranks_(static_cast<std::size_t>(n_)),
      hosts_(static_cast<std::size_t>(params.hosts)),
      links_(static_cast<std::size_t>(n_)),
      symLinks_(static_cast<std::size_t>(params.ranksPerHost)) {
  if (p_.hosts < 1 || p_.ranksPerHost < 1 || p_.cores < 1)
    throw std::invalid_argument("hosts, ranks per host and cores must be at least 1");
  for (auto& h : hosts_) h.freeCores = p_.cores;
  counters_.sentBytes.assign(static_cast<std::size_t>(n_), 0);
}

void Engine::resetCounters() {
  counters_.messages = counters_.halfConnections = counters_.rootMessages = counters_.rootBytes = 0;
  std::fill(counters_.sentBytes.begin(), counters_.sentBytes.end(), 0);
}

// Its own links and its shift of the periodic ones, each peer once.
std::uint32_t Engine::links(int rank) const {
  const PeerMap& own = links_[static_cast<std::size_t>(rank)];
  const PeerMap& shifted = symLinks_[static_cast<std::size_t>(rank % p_.ranksPerHost)];
  const int base = rank - rank % p_.ranksPerHost;
  std::size_t both = 0;
  if (shifted.size()) own.forEach([&](int peer) { both += shifted.find((peer - base + n_) % n_) != nullptr; });
  return static_cast<std::uint32_t>(own.size() + shifted.size() - both);
}

std::uint32_t Engine::peakLinks() const {
  std::uint32_t most = 0;
  for (int r = n_ > 1 ? 1 : 0; r < n_; ++r) most = std::max(most, links(r));
  return most;
}

// ---- events and cores ----

void Engine::schedule(Time t, Ev kind, int rank, std::uint64_t arg) { queue_.push(Event{t, seq_++, arg, rank, kind}); }

void Engine::run() {
  while (!queue_.empty()) {
    Event e = queue_.top();
    queue_.pop();
    now_ = e.t;
    ++events_;
    dispatch(e);
  }
}

void Engine::at(Time t, int rank, std::uint64_t token) { schedule(std::max(t, now_), Ev::At, rank, token); }

void Engine::work(int rank, Time cost, std::uint64_t token) { pushJob(rank, Job{cost, token, JobKind::Work}); }

void Engine::pushJob(int rank, Job job) {
  RankState& r = ranks_[static_cast<std::size_t>(rank)];
  const bool reading = job.kind == JobKind::Recv || job.kind == JobKind::Accept || job.kind == JobKind::ByeRead ||
                       job.kind == JobKind::ByeAckRead;
  (reading ? r.incoming : r.own).push(job);
  if (r.state != State::Sleeping) return;
  HostState& h = hostOf(rank);
  if (h.freeCores > 0) {
    --h.freeCores;
    startRunning(rank, false);
  } else {
    r.state = State::Waiting;
    h.waiting.push(rank);
  }
}

// Every time a rank gets a core it pays a wake-up (epoll_wait returning),
// more when its host crowds its cores (Params::crowdedWakeUs); taking the
// core straight from another rank (ranks outnumber cores) costs a process
// switch on top. Then it runs its jobs back to back.
void Engine::startRunning(int rank, bool switched) {
  RankState& r = ranks_[static_cast<std::size_t>(rank)];
  r.state = State::Running;
  r.since = now_;
  startNext(rank, fromUs(p_.wakeUs + p_.crowdedWakeUs() + (switched ? p_.switchUs : 0)));
}

void Engine::startNext(int rank, Time extra) {
  RankState& r = ranks_[static_cast<std::size_t>(rank)];
  r.current = r.own.empty() ? r.incoming.pop() : r.own.pop();
  schedule(now_ + extra + r.current.cost, Ev::JobDone, rank, 0);
}

void Engine::handCore(HostState& host) {
  if (host.waiting.empty()) {
    ++host.freeCores;
    return;
  }
  startRunning(host.waiting.pop(), true);
}

void Engine::jobDone(int rank) {
  RankState& r = ranks_[static_cast<std::size_t>(rank)];
  finishJob(rank, r.current);  // may queue more work here or elsewhere
  HostState& h = hostOf(rank);
  if (r.idle()) {
    r.state = State::Sleeping;
    r.own.shrink();
    r.incoming.shrink();
    handCore(h);
  } else if (now_ - r.since >= fromUs(p_.quantumUs) && !h.waiting.empty()) {
    r.state = State::Waiting;  // its time slice is over and others wait
    h.waiting.push(rank);
    handCore(h);
  } else {
    startNext(rank, 0);
  }
}

void Engine::finishJob(int rank, const Job& job) {
  switch (job.kind) {
    case JobKind::Work:
      protocol_->resumed(rank, job.arg);
      return;
    case JobKind::Send: {
      // Callbacks may send (and grow the pool): they get copies.
      const auto id = static_cast<std::uint32_t>(job.arg);
      const bool eager = messages_[id].bytes <= p_.eagerBytes;
      LinkEntry* e = entry(rank, messages_[id].dst);
      if (!e) {  // released since the send was queued: dial again
        startDial(rank, messages_[id].dst);
        e = entry(rank, messages_[id].dst);
      }
      e->lastUse = ++useClock_;
      if (e->up) {
        transmit(id);
      } else {
        if (e->tail == kNone)
          e->head = id;
        else
          messages_[e->tail].next = id;
        e->tail = id;
      }
      if (eager) protocol_->sendLeft(rank, Message(messages_[id]));
      return;
    }
    case JobKind::Recv: {
      const auto id = static_cast<std::uint32_t>(job.arg);
      const Message m = std::move(messages_[id]);
      freeMessages_.push_back(id);
      if (!periodic_) touch(rank, m.src);
      protocol_->delivered(rank, m);
      return;
    }
    case JobKind::Dial: {
      const Handshake& hs = handshakes_[job.arg];
      const double oneWay = hs.local ? p_.localLatencyUs : p_.latencyUs;
      schedule(now_ + fromUs((2 * p_.connectRtts - 1) * oneWay), Ev::AcceptArrive, hs.acceptor, job.arg);
      return;
    }
    // The idle goodbye: Bye at the releasing rank, read (and acknowledged)
    // at the peer, the acknowledgement read back; then the link is closed.
    case JobKind::Bye: {
      const int peer = static_cast<int>(job.arg);
      schedule(now_ + latency(sameHost(rank, peer)), Ev::Bye, peer, static_cast<std::uint64_t>(rank));
      return;
    }
    case JobKind::ByeRead: {
      const int peer = static_cast<int>(job.arg);
      schedule(now_ + latency(sameHost(rank, peer)), Ev::ByeAck, peer, static_cast<std::uint64_t>(rank));
      return;
    }
    case JobKind::ByeAckRead:
      return closeLink(rank, static_cast<int>(job.arg));
    case JobKind::Accept: {
      const Handshake hs = handshakes_[job.arg];
      linkUp(hs.acceptor, hs.acceptorPeer);
      enforceBudget(hs.acceptor, hs.acceptorPeer);  // an admitted link counts too
      schedule(now_ + latency(hs.local), Ev::DialerUp, hs.dialer, job.arg);
      return;
    }
  }
}

void Engine::dispatch(const Event& e) {
  switch (e.kind) {
    case Ev::JobDone:
      return jobDone(e.rank);
    case Ev::At:
      return protocol_->resumed(e.rank, e.arg);
    case Ev::SendLeft: {
      const Message m = messages_[static_cast<std::uint32_t>(e.arg)];
      return protocol_->sendLeft(m.from, m);
    }
    case Ev::NicArrive: {
      const auto id = static_cast<std::uint32_t>(e.arg);
      const Message& m = messages_[id];
      HostState& h = hostOf(m.to);
      // Cut-through: an idle ingress adds nothing; a busy one queues it.
      const Time finish = std::max(now_, h.ingressFree + perBytes(m.bytes + p_.headerBytes, p_.nicGBps));
      h.ingressFree = finish;
      if (finish > now_) return schedule(finish, Ev::Arrive, m.to, id);
      return pushJob(m.to, Job{fromUs(p_.recvUs) + perBytes(m.bytes, p_.cpuGBps), id, JobKind::Recv});
    }
    case Ev::Arrive: {
      const auto id = static_cast<std::uint32_t>(e.arg);
      const Message& m = messages_[id];
      return pushJob(m.to, Job{fromUs(p_.recvUs) + perBytes(m.bytes, p_.cpuGBps), id, JobKind::Recv});
    }
    case Ev::AcceptArrive: {
      return pushJob(e.rank, Job{fromUs(p_.connectUs), e.arg, JobKind::Accept});
    }
    case Ev::Bye:
      return pushJob(e.rank, Job{fromUs(p_.recvUs + p_.sendUs), e.arg, JobKind::ByeRead});
    case Ev::ByeAck:
      return pushJob(e.rank, Job{fromUs(p_.recvUs), e.arg, JobKind::ByeAckRead});
    case Ev::DialerUp: {
      const Handshake hs = handshakes_[e.arg];
      freeHandshakes_.push_back(static_cast<std::uint32_t>(e.arg));
      return linkUp(hs.dialer, hs.dialerPeer);
    }
  }
}

// ---- messages and links ----

void Engine::route(int from, int dst, std::int32_t& to, std::int32_t& src) const {
  if (!periodic_) {
    to = dst;
    src = from;
    return;
  }
  const int shift = dst - dst % p_.ranksPerHost;  // k * R for dst on host k
  to = dst - shift;
  src = (from - shift + n_) % n_;
}

bool Engine::sameHost(int from, int dst) const {
  const int hostFrom = periodic_ ? 0 : from / p_.ranksPerHost;
  return hostFrom == dst / p_.ranksPerHost;
}

// Full mode: the rank's own links, then those every shift of it has.
// Periodic mode: only the latter; a link made in a full phase (the
// rendezvous' links to rank 0) belongs to one rank, not to its shifts.
LinkEntry* Engine::entry(int rank, int peer) {
  if (!periodic_)
    if (LinkEntry* e = links_[static_cast<std::size_t>(rank)].find(peer)) return e;
  const int base = rank - rank % p_.ranksPerHost;
  return symLinks_[static_cast<std::size_t>(rank % p_.ranksPerHost)].find((peer - base + n_) % n_);
}

LinkEntry& Engine::addEntry(int rank, int peer) {
  if (periodic_) return symLinks_[static_cast<std::size_t>(rank)].insert(peer);
  return links_[static_cast<std::size_t>(rank)].insert(peer);
}

std::uint32_t Engine::allocMessage() {
  if (!freeMessages_.empty()) {
    const std::uint32_t id = freeMessages_.back();
    freeMessages_.pop_back();
    messages_[id] = Message{};
    return id;
  }
  messages_.emplace_back();
  return static_cast<std::uint32_t>(messages_.size() - 1);
}

void Engine::connect(int from, int dst) {
  if (!entry(from, dst)) startDial(from, dst);
}

void Engine::startDial(int from, int dst) {
  std::int32_t to = 0, src = 0;
  route(from, dst, to, src);
  addEntry(from, dst);
  // Reserved at the acceptor: its sends wait for this link. (Periodic, N = 2R:
  // rank a's link to a + R is, shifted, the same pair seen from a + R.)
  if (!entry(to, src)) addEntry(to, src);
  std::uint32_t id;
  if (freeHandshakes_.empty()) {
    id = static_cast<std::uint32_t>(handshakes_.size());
    handshakes_.emplace_back();
  } else {
    id = freeHandshakes_.back();
    freeHandshakes_.pop_back();
  }
  handshakes_[id] = Handshake{from, dst, to, src, sameHost(from, dst)};
  // Periodic: when the link is its own image (rank a and a + N/2, N/2 a
  // multiple of R), the hosts' copies of it are pairwise the same link.
  counters_.halfConnections += (to == from && src == dst) ? 1 : 2;
  pushJob(from, Job{fromUs(p_.connectUs), id, JobKind::Dial});
  enforceBudget(from, dst);
}

void Engine::touch(int rank, int peer) {
  if (LinkEntry* e = entry(rank, peer)) e->lastUse = ++useClock_;
}

// As Peers::enforceBudget: past the budget, the least recently used link
// that is idle on both sides goes (the new one stays).
void Engine::enforceBudget(int rank, int newPeer) {
  if (budget_ <= 0 || periodic_) return;
  PeerMap& own = links_[static_cast<std::size_t>(rank)];
  std::size_t open = 0;
  own.forEachEntry([&](LinkEntry& e) { open += !e.release; });
  if (open <= static_cast<std::size_t>(budget_)) return;
  const LinkEntry* victim = nullptr;
  own.forEachEntry([&](LinkEntry& e) {
    if (e.peer == newPeer || !e.up || e.release || e.head != kNone) return;
    if (!victim || e.lastUse < victim->lastUse) victim = &e;
  });
  if (victim) release(rank, victim->peer);
}

bool Engine::release(int rank, int peer) {
  if (periodic_) return false;
  LinkEntry* a = entry(rank, peer);
  LinkEntry* b = entry(peer, rank);
  const auto idle = [](const LinkEntry* e) { return e && e->up && !e->release && e->head == kNone; };
  if (!idle(a) || !idle(b)) return false;
  a->release = b->release = 1;
  pushJob(rank, Job{fromUs(p_.sendUs), static_cast<std::uint64_t>(peer), JobKind::Bye});
  return true;
}

void Engine::closeLink(int rank, int peer) {
  links_[static_cast<std::size_t>(rank)].erase(peer);
  links_[static_cast<std::size_t>(peer)].erase(rank);
  protocol_->linkDown(rank, peer);
  protocol_->linkDown(peer, rank);
}

void Engine::linkUp(int rank, int peer) {
  LinkEntry* e = entry(rank, peer);
  if (!e) return;  // released meanwhile
  e->up = 1;
  std::uint32_t id = e->head;
  e->head = e->tail = kNone;
  while (id != kNone) {
    const std::uint32_t next = messages_[id].next;
    messages_[id].next = kNone;
    transmit(id);
    id = next;
  }
  protocol_->linkUp(rank, peer);
}

void Engine::send(int from, int dst, std::uint64_t bytes, Frame frame) {
  const std::uint32_t id = allocMessage();
  Message& m = messages_[id];
  m.from = from;
  m.dst = dst;
  route(from, dst, m.to, m.src);
  m.step = frame.step;
  m.call = frame.call;
  m.depth = frame.depth;
  m.kind = frame.kind;
  m.bytes = bytes;
  m.payload = std::move(frame.payload);
  ++counters_.messages;
  counters_.sentBytes[static_cast<std::size_t>(from)] += bytes;
  // Periodic: a message from rank 0 to host k's first rank is, shifted, also
  // one that rank 0 receives.
  const int atRoot = (from == 0) + (m.to == 0);
  counters_.rootMessages += static_cast<std::uint64_t>(atRoot);
  counters_.rootBytes += static_cast<std::uint64_t>(atRoot) * bytes;
  if (!entry(from, dst)) startDial(from, dst);
  pushJob(from, Job{fromUs(p_.sendUs) + perBytes(bytes, p_.cpuGBps), id, JobKind::Send});
}

void Engine::transmit(std::uint32_t id) {
  const Message& m = messages_[id];
  const bool large = m.bytes > p_.eagerBytes;
  if (sameHost(m.from, m.dst)) {
    if (large) schedule(now_, Ev::SendLeft, m.from, id);
    return schedule(now_ + latency(true), Ev::Arrive, m.to, id);
  }
  HostState& h = hostOf(m.from);
  const Time done = std::max(now_, h.egressFree) + perBytes(m.bytes + p_.headerBytes, p_.nicGBps);
  h.egressFree = done;
  if (large) schedule(done, Ev::SendLeft, m.from, id);
  schedule(done + latency(false), Ev::NicArrive, m.to, id);
}

}  // namespace tether::sim
